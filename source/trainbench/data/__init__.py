"""Input data: synthetic batches now; conversion to and reading of TFRecords next."""
