"""The rehearsal's corpora in the real ones' formats (rehearsal/media.py), read by the pipeline's own sampler."""

import re
import tarfile

import pytest

from shape_of_learning.corpus.media import decode_audio, sample_media
from shape_of_learning.rehearsal import media


def _spec(path, count):
    return {"local_path": str(path), "count": count, "seed": 0, "sklearn_digits": False}


def test_an_imagenet_like_tar_of_jpegs_is_sampled_and_decoded(tmp_path):
    tar = media.imagenet_tar(tmp_path / "ILSVRC2012_img_val.tar", 12)
    with tarfile.open(tar) as archive:
        names = archive.getnames()
    assert names[0] == "ILSVRC2012_val_00000001.JPEG" and len(names) == 12
    frame = sample_media(_spec(tar, 12), "image")
    assert sorted(frame["name"]) == names
    assert media.imagenet_tar(tmp_path / "again.tar", 12).read_bytes() == tar.read_bytes()
    with pytest.raises(ValueError, match="count 5000 must be 1 to 1797"):
        media.imagenet_tar(tmp_path / "big.tar", 5000)


def test_common_voice_like_mp3_clips_decode_at_their_length(tmp_path):
    clips = media.common_voice_clips(tmp_path / "clips", 3)
    assert all(re.fullmatch(r"common_voice_en_\d+\.mp3", clip.name) for clip in clips)
    frame = sample_media(_spec(tmp_path / "clips", 3), "audio")
    for data in frame["data"]:
        seconds = len(decode_audio(data, 16000)) / 16000
        assert 2.0 <= seconds <= 5.2  # 2-5 s, plus the MP3 encoder's padding
    again = media.common_voice_clips(tmp_path / "again", 3)
    assert [clip.read_bytes() for clip in again] == [clip.read_bytes() for clip in clips]
