"""Datasets for training transformers on small real data: images (digits, MNIST, Fashion-MNIST,
CIFAR-10/100, image folders) and byte-level text, held in memory as tensors."""

from .bundle import ImageDataBundle, TextDataBundle
from .idx import FASHION_MNIST_DEBIAN_DIR, read_idx
from .loader import make_loader
from .registry import DATASET_NAMES, load_dataset
from .safe_pickle import RestrictedUnpickler, safe_load_pickle
from .split import stratified_split
from .tensor_dataset import TensorImageDataset, channel_stats
from .text import BYTE_VOCAB_SIZE, ByteWindowDataset, load_text, read_text_bytes
from .transforms import Compose, RandomCropPad, RandomHorizontalFlip, train_augmentation

__all__ = [
    "BYTE_VOCAB_SIZE",
    "DATASET_NAMES",
    "FASHION_MNIST_DEBIAN_DIR",
    "ByteWindowDataset",
    "Compose",
    "ImageDataBundle",
    "RandomCropPad",
    "RandomHorizontalFlip",
    "RestrictedUnpickler",
    "TensorImageDataset",
    "TextDataBundle",
    "channel_stats",
    "load_dataset",
    "load_text",
    "make_loader",
    "read_idx",
    "read_text_bytes",
    "safe_load_pickle",
    "stratified_split",
    "train_augmentation",
]
