"""Every spec in schemas/ is valid, and a broken spec fails loudly with its file and field."""

import json

import jsonschema
import pytest

from protocol import specs
from protocol.specs import SpecError, Versions


def test_every_spec_validates_against_the_meta_schema():
    validator = jsonschema.Draft202012Validator(specs.meta_schema())
    files = [p for p in specs.schemas_dir().glob("*.json") if p.name != "meta-schema.json"]
    assert len(files) >= 50
    for path in files:
        errors = list(validator.iter_errors(json.loads(path.read_text())))
        assert errors == [], f"{path.name}: {errors[0].message if errors else ''}"


def test_all_specs_load_and_pair_up():
    loaded = specs.load_all()
    requests = {n[: -len("Request")] for n, s in loaded.items() if s.type == "request"}
    responses = {n[: -len("Response")] for n, s in loaded.items() if s.type == "response"}
    assert requests == responses


def _write(tmp_path, spec: dict):
    path = tmp_path / f"{spec['name']}.json"
    path.write_text(json.dumps(spec))
    return path


BASE = {
    "apiKey": 99, "type": "request", "name": "BrokenRequest", "validVersions": "0-2",
    "flexibleVersions": "1+",
    "fields": [
        {"name": "Topics", "type": "[]Topic", "versions": "0+", "about": "topics", "fields": [
            {"name": "Name", "type": "string", "versions": "0+", "about": "name"},
        ]},
    ],
}


@pytest.mark.parametrize(
    "patch, expected",
    [
        (lambda s: s["fields"][0]["fields"][0].update(type="strnig"), "fields[Topics].fields[Name].type"),
        (lambda s: s["fields"][0]["fields"][0].update(versions="x"), "fields[Topics].fields[Name].versions"),
        (lambda s: s.update(flexibleVersions="1-2"), "flexibleVersions"),
        (lambda s: s.pop("apiKey"), "apiKey"),
        (lambda s: s["fields"][0]["fields"][0].pop("about"), "about"),
        (lambda s: s["fields"][0]["fields"][0].update(tag=0), "Name"),
        (lambda s: s["fields"][0]["fields"][0].update(tag=0, taggedVersions="0+"), "taggedVersions"),
        (lambda s: s["fields"][0]["fields"].append(
            {"name": "Id", "type": "int32", "versions": "0+", "nullableVersions": "0+", "about": "x"}),
         "cannot be nullable"),
    ],
)
def test_broken_spec_names_file_and_field(tmp_path, patch, expected):
    spec = json.loads(json.dumps(BASE))
    patch(spec)
    path = _write(tmp_path, spec)
    with pytest.raises(SpecError) as info:
        specs.load_spec_file(path)
    assert "BrokenRequest.json" in str(info.value)
    assert expected in str(info.value)


def test_versions_grammar():
    assert Versions.parse("3+") == Versions(3, specs.MAX_VERSION)
    assert 5 in Versions.parse("0-5") and 6 not in Versions.parse("0-5")
    assert Versions.parse("none").empty
    assert list(Versions.parse("2")) == [2]


def test_delete_records_v3_is_ours_and_evolves_by_the_rules():
    loaded = specs.load_all()
    request, response = loaded["DeleteRecordsRequest"], loaded["DeleteRecordsResponse"]
    assert str(request.valid_versions) == "0-3" and str(request.flexible_versions) == "2+"
    leader_only = request.fields[-1]
    assert (leader_only.name, leader_only.type, leader_only.default) == ("LeaderOnly", "bool", "false")
    assert 3 in leader_only.versions and 2 not in leader_only.versions
    partition = response.fields[1].fields[1].fields
    names = [f.name for f in partition]
    assert names == ["PartitionIndex", "LowWatermark", "LeaderLogStartOffset", "ErrorCode"]  # KIP-1343's order
    assert 3 in partition[2].versions and 2 not in partition[2].versions
    assert partition[2].default is None  # the KIP gives none: int64's zero


def test_docs_table_lists_every_api_with_its_versions():
    from pathlib import Path

    from protocol.messages import APIS

    doc = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
    for key, api in APIS.items():
        assert f"| {key} | {api.name} | {api.versions} | {api.flexible_versions} |" in doc


def test_a_recorded_verdict_loads_the_same_specs_without_the_meta_schema(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fresh = specs.load_directory(specs.schemas_dir())  # validated: no stamp in this cache yet
    stamps = list((tmp_path / "ebb").glob(f"{specs.STAMP_PREFIX}*"))
    assert len(stamps) == 1

    def no_validation(*args, **kwargs):
        raise AssertionError("the meta-schema was checked although a verdict was recorded")

    monkeypatch.setattr(jsonschema, "Draft202012Validator", no_validation)
    assert specs.load_directory(specs.schemas_dir()) == fresh


def test_an_edited_spec_is_checked_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    directory = tmp_path / "schemas"
    directory.mkdir()
    _write(directory, BASE)
    assert specs.load_directory(directory)["BrokenRequest"].api_key == 99  # valid, and now stamped
    broken = json.loads(json.dumps(BASE))
    broken["fields"][0]["fields"][0]["type"] = "strnig"
    _write(directory, broken)
    with pytest.raises(SpecError, match=r"BrokenRequest.json: fields\[Topics\].fields\[Name\].type"):
        specs.load_directory(directory)


def test_specs_load_where_no_verdict_can_be_written(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert specs.load_directory(specs.schemas_dir()) == specs.load_all()
