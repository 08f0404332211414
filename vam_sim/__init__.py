"""vam_sim: the simulators behind the stack, under one roof.

libero_mock/ (the mocked LIBERO bridge and its node), libero_real/ (real LIBERO in its own
environment behind the same interface) and yam_mujoco/ (the bimanual YAM in MuJoCo behind the
driver's bus and the camera interface). Each is an adapter under the one episode runner.
"""
