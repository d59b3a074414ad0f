from configparser import ConfigParser
import setuptools, shlex, shutil
from pathlib import Path
from setuptools.command.build_py import build_py

# note: all settings are in settings.ini; edit there, not here
config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + "lib_name user branch license status min_python audience language".split()
for o in expected: assert o in cfg, "missing expected setting: {}".format(o)
setup_cfg = {o:cfg[o] for o in cfg_keys}

# SPDX license expressions: setuptools deprecates license classifiers (and says so at every build)
licenses = {'apache2': 'Apache-2.0', 'mit': 'MIT', 'gpl2': 'GPL-2.0-only', 'gpl3': 'GPL-3.0-only', 'bsd3': 'BSD-3-Clause'}
statuses = [ '1 - Planning', '2 - Pre-Alpha', '3 - Alpha',
    '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive' ]
py_versions = '3.6 3.7 3.8 3.9 3.10 3.11 3.12'.split()

requirements = shlex.split(cfg.get('requirements', ''))
if cfg.get('pip_requirements'): requirements += shlex.split(cfg.get('pip_requirements', ''))
min_python = cfg['min_python']
dev_requirements = (cfg.get('dev_requirements') or '').split()

# package data (the bundled corpus, the shipped model, the golden vectors) is listed in MANIFEST.in and picked up by
# include_package_data; its folders are listed as (namespace) packages too, or setuptools warns about each at every build

class with_chapters(build_py):
    "The wheel carries the notebooks `bert-nb course` makes a learner's workspace from (bert_nb/chapters/)."
    def run(self):
        super().run()
        out = Path(self.build_lib) / cfg['lib_path'] / 'chapters'
        out.mkdir(parents=True, exist_ok=True)
        for name in ('00_rng.ipynb', '01_wordpiece.ipynb', '02_bert.ipynb', 'exercises.py'):
            shutil.copy(Path('nbs') / name, out / name)

setuptools.setup(
    name = cfg['lib_name'],
    cmdclass = {'build_py': with_chapters},
    license = licenses.get(cfg['license'].lower(), cfg['license']),
    classifiers = [
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'].title(),
        'Natural Language :: ' + cfg['language'].title(),
    ] + ['Programming Language :: Python :: '+o for o in py_versions[py_versions.index(min_python):]],
    url = cfg['git_url'],
    packages = setuptools.find_namespace_packages(include=[cfg['lib_path'], cfg['lib_path'] + '.*']),
    include_package_data = True,
    install_requires = requirements,
    extras_require={ 'dev': dev_requirements },
    dependency_links = cfg.get('dep_links','').split(),
    python_requires  = '>=' + cfg['min_python'],
    long_description = open('README.md', encoding='utf-8').read(),
    long_description_content_type = 'text/markdown',
    zip_safe = False,
    entry_points = {
        'console_scripts': cfg.get('console_scripts','').split(),
        'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d']
    },
    **setup_cfg)
