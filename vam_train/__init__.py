"""vam_train: demonstrations, datasets, losses and the trainer (recovery rounds included)."""
