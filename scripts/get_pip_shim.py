"""Stand-in for pypa's get-pip.py, used only by ansible-test to bootstrap pip into its sanity venvs.

ansible-test downloads get-pip.py from a host that is not reachable from our machines; scripts/sanity.sh puts
this file in its cache instead. Like get-pip.py it installs pip (and the packages named on the command line)
into the running interpreter: first the pip wheel that CPython bundles (ensurepip, offline), then the requested
versions from the package index that pip is configured for.
"""

import subprocess
import sys

GET_PIP_ONLY = {'--no-setuptools', '--no-wheel'}

# ensurepip in a child process: in-process it sets PIP_CONFIG_FILE=/dev/null for everything started after it.
subprocess.check_call([sys.executable, '-m', 'ensurepip', '--upgrade', '--default-pip'])
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, '-m', 'pip', 'install'] + args))
