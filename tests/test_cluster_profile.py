"""Cluster profiles (loaderbench.study.cluster_profile): the shipped ones load, and a bad one is one error that
names the file, every key that is wrong and what is allowed, before anything is submitted."""

from __future__ import annotations

import pytest

from loaderbench.errors import ProfileError
from loaderbench.study.cluster_profile import load_profile
from tests.conftest import REPO


@pytest.mark.parametrize("name", ["slurm", "test"])
def test_the_shipped_profiles_load(name):
    p = load_profile(REPO / "slurm" / f"{name}.toml")
    assert p.name == name and p.settings.slurm.node_cores >= 1


def test_the_test_cluster_profile_fits_the_test_cluster():
    s = load_profile(REPO / "slurm" / "test.toml").settings
    assert (s.slurm.partition, s.slurm.node_cores, s.container.kind) == ("debug", 2, "none")


def test_defaults_fill_what_a_profile_leaves_out(tmp_path):
    path = tmp_path / "mini.toml"
    path.write_text("[slurm]\nnode_cores = 8\n")
    s = load_profile(path).settings
    assert s.slurm.time_limit_min == 30 and s.slurm.max_requeues == 3 and s.slurm.logs == "slurm-logs"
    assert s.container.kind == "none" and s.container.image is None


def error(tmp_path, text: str) -> str:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as exc:
        load_profile(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg and "Traceback" not in msg
    return msg


def test_every_bad_key_in_one_message(tmp_path):
    msg = error(
        tmp_path,
        '[slurm]\nnode_cores = 0\ntime_limit_min = "30"\npartiton = "gpu"\n[container]\nkind = "docker"\n',
    )
    assert "slurm.node_cores = 0: Input should be greater than or equal to 1" in msg
    assert "slurm.time_limit_min = '30': Input should be a valid integer" in msg  # strict: no string numbers
    assert "slurm.partiton: unknown key" in msg
    assert "container.kind = 'docker': Input should be 'none', 'apptainer' or 'pyxis'" in msg


def test_a_missing_required_key_or_table(tmp_path):
    assert "slurm.node_cores: missing" in error(tmp_path, '[slurm]\npartition = "debug"\n')
    assert "slurm: missing" in error(tmp_path, '[container]\nkind = "none"\n')


def test_a_container_without_its_image(tmp_path):
    msg = error(tmp_path, '[slurm]\nnode_cores = 4\n[container]\nkind = "apptainer"\n')
    assert "container.image: missing" in msg and "the SIF path (apptainer)" in msg


def test_an_extra_sbatch_option_must_look_like_one(tmp_path):
    msg = error(tmp_path, '[slurm]\nnode_cores = 4\nextra_sbatch = ["--constraint=a100", "rm -rf /"]\n')
    assert "slurm.extra_sbatch.1 = 'rm -rf /'" in msg and "--constraint" not in msg


def test_unreadable_and_missing_profiles(tmp_path):
    assert "cannot read the profile" in error(tmp_path, "[slurm\nnode_cores = 4\n")
    (tmp_path / "other.toml").write_text("[slurm]\nnode_cores = 1\n")
    with pytest.raises(ProfileError, match=r"nosuch.toml: no such cluster profile; profiles here: bad, other"):
        load_profile(tmp_path / "nosuch.toml")
