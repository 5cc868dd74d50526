"""One module per family of methods; each ends with its `METHODS` declarations, and the registry
(`seqq.estimators.registry.discover`) imports every module here: a new one needs no other edit."""
