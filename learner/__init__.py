"""The Ape-X learner (PyTorch): double DQN, dueling head, n-step targets, prioritized replay."""
