"""Tables and figures from sweep results (`seqq report`)."""
