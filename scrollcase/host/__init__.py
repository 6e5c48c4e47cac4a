"""The host room: facts about the machine a box is built or installed on (platform, GPUs, driver) and the GPU check."""
