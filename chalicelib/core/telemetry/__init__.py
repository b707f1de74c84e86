"""Telemetry for operators: OpenTelemetry traces (``tracing``) and OpenLineage run events (``openlineage``),
each off unless its endpoint is configured."""
