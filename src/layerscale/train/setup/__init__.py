"""From a config to what the loop trains: the datasets (``data_setup``), the model (``model_build``) and its
initial weights (``initial_weights``)."""
