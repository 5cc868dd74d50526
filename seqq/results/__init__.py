"""The results table that sweeps write and reports read: its columns (`schema.py`) and the
crash-safe Parquet parts it is stored in (`store.py`). Both layers import this package; neither
imports the other."""
