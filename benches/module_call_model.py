"""The model whose module calls benches/module_call_cost.py times and
benches/module_call_instructions.py counts: 60 blocks of Linear(16, 16) + ReLU, 181 module calls
a step (the Sequential, 60 blocks, their 120 layers), compute tiny, so that memprof's share of a
step is large. `junk`: a tensor each block writes to before its layers (module_call_cost.py's
--sweep, evicting the caches between module calls as a GPU step's libraries do). `ResNet50`:
torchvision's resnet50 module for module, for benches/module_call_instructions.py's `resnet`
(torchvision is not installed here)."""
import torch


class Block(torch.nn.Module):
    def __init__(self, junk=None):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.relu = torch.nn.ReLU()
        self.junk = junk

    def forward(self, x):
        if self.junk is not None:
            self.junk.add_(1.0)
        return self.relu(self.linear(x))


def build(junk=None):
    """The model, its input, and its module calls a step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(junk) for _ in range(60)])
    return model, torch.randn(4, 16), sum(1 for _ in model.modules())


class Bottleneck(torch.nn.Module):
    """torchvision's ResNet-50 bottleneck block, module for module."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        width, out = planes, planes * 4
        self.conv1 = torch.nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(width)
        self.conv2 = torch.nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(width)
        self.conv3 = torch.nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = torch.nn.BatchNorm2d(out)
        self.relu = torch.nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = torch.nn.Sequential(
                torch.nn.Conv2d(inplanes, out, 1, stride, bias=False), torch.nn.BatchNorm2d(out))

    def forward(self, x):
        identity = x
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(y + identity)


class ResNet50(torch.nn.Module):
    """torchvision's resnet50, module for module (151 modules, 183 module calls a step; 161
    parameters and 159 buffers), so that its module calls, saved tensors and buffers are counted
    without torchvision."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(64)
        self.relu = torch.nn.ReLU(inplace=True)
        self.maxpool = torch.nn.MaxPool2d(3, 2, 1)
        layers, inplanes = [], 64
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            blocks_ = []
            for i in range(blocks):
                blocks_.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = planes * 4
            layers.append(torch.nn.Sequential(*blocks_))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(2048, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))
