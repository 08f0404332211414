"""vam_experiments: studies of a trained model, apart from the product path (the TR study)."""
