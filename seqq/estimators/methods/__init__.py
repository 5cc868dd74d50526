"""One module per family of methods; each ends with its `METHODS` declarations."""
