"""moetune's Python plugin host: out-of-process MoE backends (docs/plugins.md)."""
