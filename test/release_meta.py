#!/usr/bin/env python3
"""The release's version lives in queue.control (default_version); the
files that repeat it take it from there.

  python3 test/release_meta.py --check   META.json carries the control file's
                                         version and is valid PGXN metadata
  python3 test/release_meta.py --write   set META.json's versions from the
                                         control file; write debian/changelog
                                         (make deb calls this)

PGXN wants semantic versions (major.minor.patch): the control file's
"1.10" is "1.10.0" there and "1.10" in the Debian package.  The checks are
the rules of PGXN's Meta Spec 1.0.0 (https://pgxn.org/spec/): the required
keys, the forms of name, version, license, provides, prereqs, resources,
release_status and tags, and no other top-level key unless it starts with
"x_" or "X_".  No PGXN validator is packaged by Debian, so they are here.
Exit status 0 when all hold, 1 with a line per fault otherwise.
"""
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SEMVER = re.compile(r'^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+)?$')
LICENSES = {
    'agpl_3', 'apache_1_1', 'apache_2_0', 'artistic_1', 'artistic_2', 'bsd',
    'freebsd', 'gfdl_1_2', 'gfdl_1_3', 'gpl_1', 'gpl_2', 'gpl_3', 'lgpl_2_1',
    'lgpl_3_0', 'mit', 'mozilla_1_0', 'mozilla_1_1', 'openssl', 'perl_5',
    'postgresql', 'qpl_1_0', 'ssleay', 'sun', 'zlib', 'open_source',
    'restricted', 'unrestricted', 'unknown'}
TOP_KEYS = {'name', 'abstract', 'description', 'version', 'maintainer',
            'license', 'provides', 'prereqs', 'release_status', 'resources',
            'tags', 'no_index', 'generated_by', 'meta-spec'}
PHASES = {'configure', 'build', 'test', 'runtime', 'develop'}
RELATIONS = {'requires', 'recommends', 'suggests', 'conflicts'}


def control_version():
    with open(os.path.join(ROOT, 'queue.control')) as f:
        m = re.search(r"^default_version\s*=\s*'([^']+)'", f.read(), re.M)
    if not m:
        sys.exit("release_meta: queue.control names no default_version")
    return m.group(1)


def semver_of(v):
    return v if v.count('.') >= 2 else v + '.0' * (2 - v.count('.'))


def version_ok(v):
    # prereq versions may also be 0 (any) or carry an operator
    v = str(v).strip()
    if v == '0':
        return True
    for part in v.split(','):
        part = re.sub(r'^\s*(==|!=|>=|<=|>|<)?\s*', '', part)
        if not SEMVER.match(part):
            return False
    return True


def check(meta, want):
    faults = []
    for k in ('name', 'abstract', 'maintainer', 'license', 'provides', 'version', 'meta-spec'):
        if k not in meta:
            faults.append('missing required key %r' % k)
    for k in meta:
        if k not in TOP_KEYS and not k.lower().startswith('x_'):
            faults.append('unknown top-level key %r' % k)
    name = meta.get('name', '')
    if not isinstance(name, str) or len(name) < 2 or re.search(r'[/\\\x00-\x1f\s]', name):
        faults.append('name %r is not a PGXN name' % (name,))
    if not SEMVER.match(str(meta.get('version', ''))):
        faults.append('version %r is not semantic' % meta.get('version'))
    if meta.get('version') != want:
        faults.append('version %r is not the control file\'s (%s)' % (meta.get('version'), want))
    m = meta.get('maintainer')
    if not (isinstance(m, str) and m) and not (isinstance(m, list) and m and all(isinstance(x, str) and x for x in m)):
        faults.append('maintainer must be a string or a list of strings')
    lic = meta.get('license')
    if isinstance(lic, str):
        if lic not in LICENSES:
            faults.append('license %r is not one of the spec\'s' % lic)
    elif isinstance(lic, list):
        if not lic or any(x not in LICENSES for x in lic):
            faults.append('license list holds a name not in the spec')
    elif isinstance(lic, dict):
        if not lic or not all(isinstance(v, str) and re.match(r'^https?://', v) for v in lic.values()):
            faults.append('license object must map names to URLs')
    else:
        faults.append('license must be a string, a list or an object')
    prov = meta.get('provides')
    if not isinstance(prov, dict) or not prov:
        faults.append('provides must be a non-empty object')
    else:
        for ext, p in prov.items():
            if not isinstance(p, dict):
                faults.append('provides.%s must be an object' % ext)
                continue
            for k in p:
                if k not in ('file', 'version', 'abstract', 'docfile') and not k.lower().startswith('x_'):
                    faults.append('provides.%s has unknown key %r' % (ext, k))
            if 'file' not in p or not os.path.exists(os.path.join(ROOT, p['file'])):
                faults.append('provides.%s.file must name a file of the distribution' % ext)
            if 'docfile' in p and not os.path.exists(os.path.join(ROOT, p['docfile'])):
                faults.append('provides.%s.docfile names no file' % ext)
            if not SEMVER.match(str(p.get('version', ''))):
                faults.append('provides.%s.version is not semantic' % ext)
            if ext == meta.get('name') and p.get('version') != want:
                faults.append('provides.%s.version is not the control file\'s (%s)' % (ext, want))
    pre = meta.get('prereqs', {})
    if not isinstance(pre, dict):
        faults.append('prereqs must be an object')
    else:
        for phase, rels in pre.items():
            if phase not in PHASES or not isinstance(rels, dict):
                faults.append('prereqs has a bad phase %r' % phase)
                continue
            for rel, reqs in rels.items():
                if rel not in RELATIONS or not isinstance(reqs, dict):
                    faults.append('prereqs.%s has a bad relation %r' % (phase, rel))
                    continue
                for dep, v in reqs.items():
                    if not version_ok(v):
                        faults.append('prereqs.%s.%s.%s: %r is no version' % (phase, rel, dep, v))
    if 'release_status' in meta and meta['release_status'] not in ('stable', 'testing', 'unstable'):
        faults.append('release_status must be stable, testing or unstable')
    tags = meta.get('tags', [])
    if not isinstance(tags, list) or any(not isinstance(t, str) or not t or len(t) > 255 for t in tags):
        faults.append('tags must be a list of strings of 1 to 255 characters')
    res = meta.get('resources', {})
    if not isinstance(res, dict) or any(k not in ('homepage', 'bugtracker', 'repository') and not k.lower().startswith('x_') for k in res):
        faults.append('resources has an unknown key')
    spec = meta.get('meta-spec', {})
    if not isinstance(spec, dict) or spec.get('version') != '1.0.0':
        faults.append('meta-spec.version must be 1.0.0')
    return faults


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else '--check'
    version = control_version()
    want = semver_of(version)
    path = os.path.join(ROOT, 'META.json')
    with open(path) as f:
        meta = json.load(f)
    if mode == '--write':
        meta['version'] = want
        for ext, p in meta.get('provides', {}).items():
            if ext == meta.get('name'):
                p['version'] = want
        with open(path, 'w') as f:
            json.dump(meta, f, indent=3, ensure_ascii=False)
            f.write('\n')
        with open(os.path.join(ROOT, 'debian', 'changelog'), 'w') as f:
            f.write('queue (%s) unstable; urgency=medium\n\n'
                    '  * Release %s (the version queue.control names).\n\n'
                    ' -- %s  %s\n' % (version, version, meta['maintainer'][0],
                                      time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())))
    faults = check(meta, want)
    for x in faults:
        print('META.json: ' + x)
    if not faults:
        print('META.json: valid PGXN metadata, version %s (queue.control: %s)' % (want, version))
    return 1 if faults else 0


if __name__ == '__main__':
    sys.exit(main())
