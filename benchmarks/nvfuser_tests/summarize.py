import collections
import sys
import xml.etree.ElementTree as ET

tot = collections.Counter()
for path in sys.argv[1:]:
    root = ET.parse(path).getroot()
    for tc in root.iter("testcase"):
        name = tc.get("name")
        kind = "pass"
        msg = ""
        for child in tc:
            if child.tag in ("failure", "error", "skipped"):
                kind = child.tag
                msg = (
                    (child.get("message") or "").splitlines()[0][:160]
                    if child.get("message")
                    else ""
                )
        tot[kind] += 1
        if kind != "pass":
            print(f"{path.split('/')[-1][:14]:14} {name[:55]:55} {kind:7} {msg}")
print(dict(tot))
