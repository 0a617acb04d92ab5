"""Datasets for loaderbench: the embedded synthetic JPEG set and real ImageFolder trees.

The rest of the suite calls :func:`ensure_dataset` with a :class:`DatasetSpec` (a study
file's ``[dataset]`` table) and gets back a :class:`PreparedDataset`: an ImageFolder root,
the sorted relative file paths, their class labels, a digest that identifies exactly those
files, and summary statistics for the result records.  Import these names from here; the
modules behind them are:

``types``        DatasetSpec, PreparedDataset, DatasetError
``recipes``      the shipped recipes (``loaderbench/recipes/<recipe>.toml``) or a path: loading, validation, the key
``synthesis``    recipe + index -> JPEG bytes (numpy and Pillow only)
``manifest``     a dataset's file list: digest, summary, ``manifest.json``, its verification
``imagefolder``  scanning an existing ImageFolder tree
``cache``        ensure_dataset / verify_dataset and the on-disk cache of generated sets
``cli``          ``python -m loaderbench.datasets --images N``: generate or check a dataset by hand

``synthetic-jpeg`` datasets are byte-identical from run to run and machine to machine as
long as numpy, Pillow and its libjpeg-turbo are the same versions; the manifest records
those versions.
"""

from loaderbench.datasets.cache import default_cache_dir, ensure_dataset, verify_dataset
from loaderbench.datasets.imagefolder import scan_imagefolder
from loaderbench.datasets.recipes import load_recipe
from loaderbench.datasets.synthesis import generate_image
from loaderbench.datasets.types import KINDS, DatasetError, DatasetSpec, PreparedDataset

__all__ = [
    "KINDS",
    "DatasetError",
    "DatasetSpec",
    "PreparedDataset",
    "default_cache_dir",
    "ensure_dataset",
    "generate_image",
    "load_recipe",
    "scan_imagefolder",
    "verify_dataset",
]
