"""The builder: measuring runs -> the dataset folder (Parquet, card, JSON, patch, plots) -> the Hub.

`builder.build.build_dataset` writes the folder, `builder.push.push_folder` publishes it,
`python -m builder.regenerate` drives both. Nothing here is imported by `pallasbench_dataset`.
"""
