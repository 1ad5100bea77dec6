#!/usr/bin/env python3
"""Validates JSON files against detach's schemas (docs/schema/), for the tests.

    tests/helpers/validate_json.py SCHEMA FILE...     (SCHEMA: run-stats, ps, check, ...)

Exit 0 when every FILE matches, 1 with each error's place otherwise, 2 for bad
usage or a missing python3-jsonschema."""
import json
import os
import sys

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "schema")


def validator(name):
    import jsonschema
    store = {}
    for f in os.listdir(SCHEMA_DIR):
        if f.endswith(".schema.json"):
            with open(os.path.join(SCHEMA_DIR, f)) as fh:
                s = json.load(fh)
            store[s["$id"]] = s
    schema = store[f"{name}.schema.json"]
    cls = jsonschema.Draft202012Validator
    cls.check_schema(schema)
    try:                                    # jsonschema >= 4.18
        from referencing import Registry, Resource
        reg = Registry().with_resources((k, Resource.from_contents(v)) for k, v in store.items())
        return cls(schema, registry=reg)
    except ImportError:                     # Debian 12: 4.10
        return cls(schema, resolver=jsonschema.RefResolver(schema["$id"], schema, store=store))


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    try:
        v = validator(argv[0])
    except ImportError:
        print("validate_json: error: no jsonschema module\nNOTE: run make deps (apt package python3-jsonschema)")
        return 2
    bad = 0
    for path in argv[1:]:
        with open(path) as fh:
            doc = json.load(fh)
        errs = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
        for e in errs[:5]:
            where = "/".join(str(p) for p in e.absolute_path) or "(top)"
            print(f"{path}: {where}: {e.message[:300]}")
        if errs:
            bad += 1
        else:
            print(f"ok: {os.path.basename(path)} matches {argv[0]}.schema.json")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
