"""Data loading for the files `python -m solvers.generate` writes.

[`read_dataset`][sciml.data.read_dataset] reads the finished samples of a file
(unfinished ones are masked out) with its self-description (axes, channel names,
units, physical parameters); [`train_test_split`][sciml.data.train_test_split]
splits by sample index; [`Batches`][sciml.data.Batches] yields seeded
mini-batches; [`Normalizer`][sciml.data.Normalizer] normalises per channel and
inverts; [`read_resolutions`][sciml.data.read_resolutions] gathers test sets of
one problem at several resolutions. The file format is documented in
[`read_dataset`][sciml.data.read_dataset]'s module and on the API page. This
package reads the format only: it never imports the generator.
"""

from ._batches import Batches as Batches
from ._dataset import (
    FORMAT_VERSION as FORMAT_VERSION,
    Dataset as Dataset,
    read_dataset as read_dataset,
    read_resolutions as read_resolutions,
)
from ._normalizer import Normalizer as Normalizer
from ._split import train_test_split as train_test_split
