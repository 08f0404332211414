"""vam_policy_node package."""
