"""What a run records: the metric stream (``metrics_log``), per-example test outcomes (``test_outcomes``), the
environment (``environment``), and the lines said when it ends (``run_summary``)."""
