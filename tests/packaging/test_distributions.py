"""The four distributions, as a user gets them from an index.

One repository, four pyprojects released in lockstep: ``hammer-plugins`` (root), ``langchain-hammer``
(integrations/langchain), ``llama-index-llms-hammer`` (integrations/llama-index) and ``hammer-evals``
(evals). Every wheel and sdist is built; each wheel must hold only its own package and a LICENSE,
and the two adapters are installed into clean virtual environments from those wheels (their other
dependencies from the index, as a user's pip does) to run a scripted call with only one framework
present.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from built_dists import DISTRIBUTIONS, ROOT, VERSION, clean_venv, wheel_path
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

# sha256 of the Apache License 2.0 as apache.org publishes it (LICENSE-2.0.txt, 11358 bytes).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def _pyproject(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))


def _pins(requirements: list[str], owner: str) -> dict[str, str]:
    """``{"hammer-plugins (its requirement)": "0.1.0", ...}``: the pins on this repository's other distributions."""
    pins = {}
    for requirement in requirements:
        name = requirement.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip()
        if name in DISTRIBUTIONS and name != owner:  # an extra of its own (hammer-plugins[all]) is no pin
            assert "==" in requirement, f"{requirement!r}: the distributions are released in lockstep, pin with =="
            pins[f"{name} ({requirement})"] = requirement.split("==", 1)[1].strip()
    return pins


def test_every_distribution_has_the_root_version_and_pins_its_siblings_to_it() -> None:
    for name, (folder, _) in DISTRIBUTIONS.items():
        project = _pyproject(folder)["project"]
        assert project["name"] == name
        if folder != ROOT:
            assert project["dynamic"] == ["version"], name
            version_from = _pyproject(folder)["tool"]["hatch"]["version"]
            assert (folder / version_from["path"]).resolve() == ROOT / "pyproject.toml", name
        requirements = project.get("dependencies", []) + [
            r for extra in project.get("optional-dependencies", {}).values() for r in extra]
        wrong = {pin: version for pin, version in _pins(requirements, name).items() if version != VERSION}
        assert wrong == {}, f"{name}: pins disagree with the root version {VERSION}"
        assert importlib.metadata.version(name) == VERSION, f"{name} installed is not the checkout's version"


def test_version_attributes_come_from_the_installed_metadata() -> None:
    import langchain_hammer
    from llama_index.llms import hammer as llama_index_llms_hammer

    import hammer_evals
    import hammer_plugins

    versions = {module.__name__: module.__version__
                for module in (hammer_plugins, langchain_hammer, llama_index_llms_hammer, hammer_evals)}
    assert versions == dict.fromkeys(versions, VERSION)


def test_every_project_folder_has_the_same_standard_license() -> None:
    for name, (folder, _) in DISTRIBUTIONS.items():
        text = (folder / "LICENSE").read_bytes()
        assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256, f"{name}: LICENSE is not the Apache-2.0 text"
        project = _pyproject(folder)["project"]
        assert project["license"] == "Apache-2.0" and "LICENSE" in project["license-files"], name
        assert set(project["urls"]) == {"Homepage", "Documentation", "Source", "Issues"}, name
        assert (folder / "README.md").is_file(), name


def test_the_llama_index_namespace_stays_open_and_llamahub_finds_the_class() -> None:
    folder = ROOT / "integrations" / "llama-index"
    assert not (folder / "llama_index" / "__init__.py").exists()
    assert not (folder / "llama_index" / "llms" / "__init__.py").exists()
    llamahub = _pyproject(folder)["tool"]["llamahub"]
    module = importlib.import_module(llamahub["import_path"])
    assert set(llamahub["class_authors"]) <= set(module.__all__)


def test_no_framework_in_the_core_and_no_dev_extra() -> None:
    project = _pyproject(ROOT)["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    assert not [r for r in requirements if r.startswith(("langchain", "langgraph", "llama-index"))]
    assert "dev" not in project["optional-dependencies"]
    assert "dev" in _pyproject(ROOT)["dependency-groups"]


# --- built wheels and sdists ---------------------------------------------------------------------------


def _wheel(dist: Path, name: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel_path(dist, name))


def _metadata(wheel: zipfile.ZipFile) -> str:
    return wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()


def test_each_wheel_holds_only_its_own_package_and_a_license(dist: Path) -> None:
    for name, (_, package) in DISTRIBUTIONS.items():
        wheel = _wheel(dist, name)
        dist_info = f"{name.replace('-', '_')}-{VERSION}.dist-info/"
        files = wheel.namelist()
        strangers = [f for f in files if not f.startswith((package + "/", dist_info))]
        assert strangers == [], f"{name} ships files outside {package}/"
        license_text = wheel.read(dist_info + "licenses/LICENSE")
        assert hashlib.sha256(license_text).hexdigest() == APACHE_2_SHA256, name
        metadata = _metadata(wheel)
        assert f"\nVersion: {VERSION}\n" in metadata and "License-Expression: Apache-2.0" in metadata, name
        assert "Project-URL: Source," in metadata, name
        for line in metadata.splitlines():
            if line.startswith("Requires-Dist: ") and line.split()[1].split("[")[0].split("=")[0] in DISTRIBUTIONS:
                assert f"=={VERSION}" in line, f"{name}: {line}"
        sdist = tarfile.open(dist / f"{name.replace('-', '_')}-{VERSION}.tar.gz")
        sdist_files = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
        assert {"LICENSE", "PKG-INFO", "pyproject.toml", "README.md"} <= sdist_files, name


def test_wheel_boundaries(dist: Path) -> None:
    core = _wheel(dist, "hammer-plugins")
    assert f"hammer_plugins-{VERSION}.dist-info/licenses/NOTICE" in core.namelist()  # the default model's weights
    assert not [n for n in core.namelist() if "datasets" in n or n.endswith(".gz")]
    requires = [line for line in _metadata(core).splitlines() if line.startswith("Requires-Dist:")]
    assert not [r for r in requires if "langchain" in r or "llama-index" in r or "langgraph" in r], requires

    langchain = _metadata(_wheel(dist, "langchain-hammer"))
    assert "Requires-Dist: langchain-core<2,>=1.0" in langchain
    assert "Requires-Dist: langchain>" not in langchain and "langgraph" not in langchain

    llama = _wheel(dist, "llama-index-llms-hammer")
    assert "llama_index/__init__.py" not in llama.namelist()
    assert "llama_index/llms/__init__.py" not in llama.namelist()
    assert "llama_index/llms/hammer/__init__.py" in llama.namelist()
    assert "Requires-Dist: llama-index-core<0.15,>=0.14" in _metadata(llama)

    evals = _wheel(dist, "hammer-evals")
    assert "hammer_evals/datasets/NOTICE" in evals.namelist()  # beside the data it names
    assert "Evaluation data shipped with hammer-evals" in evals.read("hammer_evals/datasets/NOTICE").decode()
    assert [n for n in evals.namelist() if n.startswith("hammer_evals/datasets/academic/")]
    entry_points = evals.read(f"hammer_evals-{VERSION}.dist-info/entry_points.txt").decode()
    assert "[hammer.commands]" in entry_points and "bench = " in entry_points and "eval = " in entry_points


def _dist_info(name: str) -> str:
    return f"{name.replace('-', '_')}-{VERSION}.dist-info/"


def _requirements(metadata: str) -> list[Requirement]:
    return [Requirement(line.removeprefix("Requires-Dist: ")) for line in metadata.splitlines()
            if line.startswith("Requires-Dist: ")]


def test_every_wheel_whose_extras_install_the_weights_carries_their_notice(dist: Path) -> None:
    notice = (ROOT / "NOTICE").read_text(encoding="utf-8")
    weights = notice[notice.index("The embedded default model"):notice.index("Evaluation data\n")].strip()
    carriers = []
    for name in DISTRIBUTIONS:
        wheel = _wheel(dist, name)
        if "Provides-Extra: default-model" not in _metadata(wheel):
            continue
        text = wheel.read(_dist_info(name) + "licenses/NOTICE").decode()
        assert text.startswith(f"{name}\n") and weights in text, name
        carriers.append(name)
    assert carriers == list(DISTRIBUTIONS)  # each has a default-model extra


def test_no_wheel_holds_the_same_file_twice(dist: Path) -> None:
    # check-wheel-contents' W002: the evals NOTICE was once both package data and a license file.
    for name in DISTRIBUTIONS:
        wheel = _wheel(dist, name)
        seen: dict[str, str] = {}
        for info in wheel.infolist():
            if info.file_size and not info.filename.endswith("/RECORD"):
                digest = hashlib.sha256(wheel.read(info)).hexdigest()
                assert digest not in seen, f"{name}: {info.filename} repeats {seen[digest]}"
                seen[digest] = info.filename


def test_each_sdist_holds_its_own_project_only(dist: Path) -> None:
    # Unanchored include patterns once put the other distributions' README, LICENSE and NOTICE in hammer-plugins'.
    top_level = {"PKG-INFO", "pyproject.toml", "README.md", "LICENSE", "NOTICE", ".gitignore"}
    for name, (folder, package) in DISTRIBUTIONS.items():
        readme = _pyproject(folder)["project"]["readme"]
        with tarfile.open(dist / f"{name.replace('-', '_')}-{VERSION}.tar.gz") as sdist:
            files = {m.name.split("/", 1)[1] for m in sdist.getmembers() if m.isfile()}
        strangers = sorted(f for f in files if not f.startswith(package + "/") and f not in top_level | {readme})
        assert strangers == [], name
        assert {"NOTICE", readme} <= files, name


def test_every_runtime_requirement_has_an_upper_bound(dist: Path) -> None:
    for name in DISTRIBUTIONS:
        for requirement in _requirements(_metadata(_wheel(dist, name))):
            bounds = [s for s in requirement.specifier if s.operator in ("<", "<=", "==", "~=")]
            assert bounds, f"{name}: {requirement} has no upper bound"
            if requirement.name == "openai":  # llama-index-llms-openai keeps openai below 3 (the server's tests use it)
                assert not requirement.specifier.contains("3.0.0"), f"{name}: {requirement}"


def test_python_version_classifiers_agree_with_requires_python(dist: Path) -> None:
    for name in DISTRIBUTIONS:
        metadata = _metadata(_wheel(dist, name))
        requires = SpecifierSet(re.search(r"^Requires-Python: (.+)$", metadata, re.M).group(1))
        versions = re.findall(r"^Classifier: Programming Language :: Python :: (3\.\d+)$", metadata, re.M)
        assert versions and all(Version(v) in requires for v in versions), name
        assert min(versions, key=Version) == next(s.version for s in requires if s.operator == ">="), name


def test_each_index_page_opens_with_its_pip_command_and_links_absolutely(dist: Path) -> None:
    for name in DISTRIBUTIONS:
        metadata = _metadata(_wheel(dist, name))
        page = metadata.split("\n\n", 1)[1]  # the long description follows the headers
        first_block = re.search(r"```[a-z]*\n(.*?)```", page, re.S).group(1)
        assert first_block.startswith(f'pip install "{name}['), f"{name}: {first_block!r}"
        targets = re.findall(r"\]\(([^)\s]+)\)", page) + re.findall(r'(?:src|href)="([^"]+)"', page)
        relative = [t for t in targets if not t.startswith(("https://", "http://", "#"))]
        assert targets and relative == [], f"{name}: links that break on the index page: {relative}"


# --- clean installs: one framework each ------------------------------------------------------------------

LANGCHAIN_CALL = """
import importlib.util, json
from langchain_core.tools import tool
from hammer_plugins import ScriptedBackend
from langchain_hammer import ChatHammer

def absent(name):
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:  # its parent package is absent
        return True

@tool
def get_weather(city: str) -> str:
    '''Get the current weather for a city.'''
    return "sunny"

answer = '```\\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\\n```'
message = ChatHammer(backend=ScriptedBackend([answer])).bind_tools([get_weather]).invoke("Weather in Paris?")
print(json.dumps({"calls": [[c["name"], c["args"]] for c in message.tool_calls],
                  "absent": [m for m in ("llama_index.core", "langchain", "langgraph", "hammer_evals") if absent(m)]}))
"""

LLAMA_INDEX_CALL = """
import importlib.util, json
from llama_index.core.tools import FunctionTool
from hammer_plugins import ScriptedBackend
from llama_index.llms.hammer import HammerLLM

def absent(name):
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:  # its parent package is absent
        return True

def get_weather(city: str) -> str:
    '''Get the current weather for a city.'''
    return "sunny"

answer = '```\\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\\n```'
llm = HammerLLM(backend=ScriptedBackend([answer]))
response = llm.chat_with_tools([FunctionTool.from_defaults(get_weather)], user_msg="Weather in Paris?")
print(json.dumps({"calls": [[c.tool_name, c.tool_kwargs] for c in llm.get_tool_calls_from_response(response)],
                  "absent": [m for m in ("langchain_core", "langchain", "hammer_evals") if absent(m)]}))
"""


def _clean_install(tmp_path: Path, dist: Path, names: list[str]) -> Path:
    """A fresh venv with these distributions from the built wheels; every other dependency from the index."""
    return clean_venv(tmp_path / "venv", [str(wheel_path(dist, name)) for name in names])


def _run(python: Path, script: str) -> dict:
    result = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=300, cwd="/")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.index
@pytest.mark.timeout(900)  # a fresh venv installed from the index: pip alone has 600 s
def test_langchain_hammer_alone(dist: Path, tmp_path: Path) -> None:
    python = _clean_install(tmp_path, dist, ["hammer-plugins", "langchain-hammer"])
    found = _run(python, LANGCHAIN_CALL)
    assert found["calls"] == [["get_weather", {"city": "Paris"}]]
    assert found["absent"] == ["llama_index.core", "langchain", "langgraph", "hammer_evals"]


@pytest.mark.index
@pytest.mark.timeout(900)  # a fresh venv installed from the index: pip alone has 600 s
def test_llama_index_llms_hammer_alone(dist: Path, tmp_path: Path) -> None:
    python = _clean_install(tmp_path, dist, ["hammer-plugins", "llama-index-llms-hammer"])
    found = _run(python, LLAMA_INDEX_CALL)
    assert found["calls"] == [["get_weather", {"city": "Paris"}]]
    assert found["absent"] == ["langchain_core", "langchain", "hammer_evals"]
