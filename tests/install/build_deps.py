"""Build the collections that galaxy.yml depends on, offline, from the copies in the `ansible` bundle.

Galaxy is not reachable from the test machines. The `ansible` package of requirements.txt ships every collection it
bundles as an installed copy (site-packages/ansible_collections/NS/NAME with MANIFEST.json and FILES.json, no
galaxy.yml). For each dependency of galaxy.yml, and theirs in turn, this copies the installed files into a work
directory, writes the galaxy.yml that MANIFEST.json describes, and runs
`ansible-galaxy collection build` on it, so the artifact is built by the same tool as ours.

    python build_deps.py --source SITE_PACKAGES/ansible_collections --galaxy BIN/ansible-galaxy --output DIR

Prints one line per artifact; an artifact already in DIR for the same version is kept. Exits 1 naming the
collection when the bundle lacks a dependency or has a version outside the declared range.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from ansible.galaxy.dependency_resolution.versioning import meets_requirements

ROOT = Path(__file__).resolve().parents[2]
GALAXY_KEYS = ('namespace', 'name', 'version', 'readme', 'authors', 'description', 'license', 'license_file',
               'tags', 'dependencies', 'repository', 'documentation', 'homepage', 'issues')


def build(source, galaxy, output, fqcn, requirement, work):
    ns, name = fqcn.split('.')
    src = source / ns / name
    manifest_file = src / 'MANIFEST.json'
    if not manifest_file.is_file():
        sys.exit('build_deps: %s (%s, a dependency) is not in the bundle at %s' % (fqcn, requirement, src))
    info = json.loads(manifest_file.read_text())['collection_info']
    if not meets_requirements(info['version'], requirement):
        sys.exit('build_deps: the bundle has %s %s, outside the declared range %s'
                 % (fqcn, info['version'], requirement))
    artifact = output / ('%s-%s-%s.tar.gz' % (ns, name, info['version']))
    if not artifact.exists():
        tree = work / ns / name
        # The bundle leaves out some files that FILES.json lists (tests, CI set-up): copy what it has.
        shutil.copytree(str(src), str(tree),
                        ignore=shutil.ignore_patterns('__pycache__', 'MANIFEST.json', 'FILES.json'))
        meta = {k: info[k] for k in GALAXY_KEYS if info.get(k) not in (None, [], '')}
        meta.setdefault('readme', 'README.md')
        (tree / 'galaxy.yml').write_text(yaml.safe_dump(meta, sort_keys=False))
        subprocess.run([galaxy, 'collection', 'build', str(tree), '--output-path', str(output)], check=True,
                       stdout=subprocess.DEVNULL)
    print('%s %s: %s' % (fqcn, info['version'], artifact))
    return info.get('dependencies') or {}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--source', required=True, type=Path, help='the bundle: site-packages/ansible_collections')
    parser.add_argument('--galaxy', required=True, help='the ansible-galaxy to build with')
    parser.add_argument('--output', required=True, type=Path)
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    todo = list((yaml.safe_load((ROOT / 'galaxy.yml').read_text()).get('dependencies') or {}).items())
    done = set()
    with tempfile.TemporaryDirectory() as work:
        while todo:
            fqcn, requirement = todo.pop(0)
            if fqcn in done:
                continue
            done.add(fqcn)
            todo.extend(build(args.source, args.galaxy, args.output, fqcn, requirement, Path(work)).items())
    return 0


if __name__ == '__main__':
    sys.exit(main())
