"""Setup: ``configure()``'s settings, ragtrace's own tracer and meter providers, the metric
instruments, the Prometheus endpoint and the content (redaction) policy."""
