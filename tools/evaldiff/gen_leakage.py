#!/usr/bin/env python3
"""Random leakage-scanner input (project-written generator for tools/evaldiff/run.sh)."""
import json, random, sys
random.seed(int(sys.argv[1]))
ws = [' ', '\t', '\x1c', '\x1f', '\x85', '\xa0', '\u2028', '\u3000', '\u200b', '\ufeff', '=', '"', "'", '`', 'x', '']
dirs = ['home','root','localhome','mnt','workspace','tmp','Home','tmpx','var']
keys = ['a','Heldout_Answer','expected_answerX','x.y','evaluation_content_used','my_assistant_target_included','rollout_transcript_reuse_allowed','teacher_trajectory_included','Évaluation_Report','ﬁeld','ß','STRASSE']
vals = [True, False, 0, 1, None, "false", 1.5, [], {}]
def rstr():
    s = ''
    for _ in range(random.randint(0,3)):
        s += random.choice(ws) + random.choice(['/', '']) + random.choice(dirs) + random.choice(['/', '']) + random.choice(['Straße','SECRET-task-42','heldout q7','ΣΑΣ',''])
    return s
def rval(d=0):
    r = random.random()
    if d < 3 and r < 0.25:
        return {random.choice(keys): rval(d+1) for _ in range(random.randint(0,3))}
    if d < 3 and r < 0.4:
        return [rval(d+1) for _ in range(random.randint(0,3))]
    if r < 0.7: return rstr()
    return random.choice(vals)
lines = []
for _ in range(30):
    r = random.random()
    if r < 0.1: lines.append('{bad')
    elif r < 0.15: lines.append('')
    else: lines.append(json.dumps(rval(), ensure_ascii=random.random()<0.5))
seps = ['\n','\r\n','\r']
print(''.join(l + random.choice(seps) for l in lines), end='')
