"""Datasets, framework-free: making them (ImageNet trees to TFRecords, text corpora and COCO to their records,
tiny generated sets for the demo and the tests), the record kinds and their schemas (``record_kinds``,
``record_schemas``), reading and checking shards (``tfrecord_reader``, ``verify``), a data folder as a model sees it
(``source``, ``model_data``) and the learnable synthetic sets (``synthetic``). Neither torch nor TensorFlow is
imported here: each framework's input pipeline lives beside its engine (``engines/torch/``, ``engines/tf/``)."""
