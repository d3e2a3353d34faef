# Case 5: start-up. Imports torch and makes a first CUDA call, then exits.
import torch

torch.zeros(1, device="cuda")
