"""The data an analysis is scored and judged on: the evaluation set as tensors with its task and loss
(``evaluation``), and a source's calibration and evaluation splits (``source_data``)."""
