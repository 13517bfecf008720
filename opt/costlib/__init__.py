"""Cost library: hardware catalog, model cards, per-operator work, latency models, calibration."""
