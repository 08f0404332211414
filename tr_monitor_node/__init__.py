"""tr_monitor_node package."""
