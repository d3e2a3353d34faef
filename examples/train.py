"""A small real training loop: a convolutional classifier on random images, one SGD step per batch.

    memprof run -f train_step examples/train.py --steps 3

Runs on the GPU when there is one, else on the CPU (or pass --device).
"""
import argparse

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Linear(64 * 8 * 8, classes)

    def forward(self, x):
        x = self.features(x)
        return self.head(x.flatten(1))


def train_step(model, optimizer, images, labels):
    optimizer.zero_grad(set_to_none=True)
    logits = model(images)
    loss = nn.functional.cross_entropy(logits, labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net().to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(args.steps):
        images = torch.randn(args.batch, 3, 32, 32, device=args.device)
        labels = torch.randint(0, 10, (args.batch,), device=args.device)
        loss = train_step(model, optimizer, images, labels)
        print(f"step {step}: loss {loss:.4f}")


if __name__ == "__main__":
    main()
