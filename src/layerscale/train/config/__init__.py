"""The training configuration: its four dataclass sections validated once (``schema``), config files and
``--set`` overrides (``config_file``), packaged config names (``config_source``), and the shape check every
config tree passes first (``config_tree``)."""
