"""The control loop in plain Python (no ROS): chunk executor, schedule, policy runtime, policy worker
process, safety filter and pacing. Above vam_stack/vam_model, below every node package."""
