"""vam_model: the latent video-action model as a ROS-free library.

networks/ (tokenizer, DiT feature extractor, FlowUniPC video solver, action head, text encoder,
checkpoint I/O, `model-info`), the policy (`VamPolicy.reset` / `infer`), the Temporal Ratio,
TR-scheduled guidance, the DiT backends (torch, onnxruntime, TensorRT) and ONNX export.
Nothing here imports rclpy, a node package or a simulator (tests/test_layout.py holds that).
"""
