"""Which words a span may end or start with when a sentence has to be cut between spaces.

A first span over its budget is cut inside its sentence. At the last space that fit, the cut
fell after an article or a preposition ("Bitte halten Sie Ihre | Auftragsbestätigung
bereit.", "confirmed for March | fifteenth"): the model spoke the head with a falling end on a
word that binds to the next, and ASR garbled the phrase (issue #45). A cut before a word that
opens a phrase or clause is where a speaker breathes; after a binding word is the worst place.
Lists for the Latin languages the neural voices speak (en, de, es, fr, it, pt).
"""

from __future__ import annotations

PHRASE_OPENERS = frozenset(
    # en
    "and but or because which when where while if so then please unless although though "
    # de
    "und oder aber denn weil dass wenn ob damit sodass bitte "
    # es, fr, it, pt
    "y pero porque cuando si et ou mais parce quand ma perché quando se mas".split()
)
"""Conjunctions and "please": a cut right before one of these (lower-cased) is a good one."""

BINDS_TO_NEXT = frozenset(
    # en
    "the a an my your our their his her its this these those of to in on at for with by from is "
    "are was were be will can could would should must may not no mr mrs ms dr "
    "january february march april june july august september october november december "
    # de
    "der die das den dem des ein eine einen einem einer eines mein meine ihr ihre ihren ihrer "
    "ihrem sein seine unser unsere am im zum zur vom beim ins per mit für von zu auf an in aus "
    "bei nach über unter um durch ohne gegen sie "
    # es
    "el la los las un una unos unas de del al en con por para su sus mi mis "
    # fr
    "le les une des du au aux votre vos mon mes son sa ses "
    # it
    "il lo gli uno di della dello delle dei degli nel nella sul "
    # pt
    "o os as um uma do da dos das em no na seu sua".split()
)
"""A cut right after one of these (lower-cased) splits a phrase: avoided where another fits."""


def space_cut_kind(before: str, after: str) -> int:
    """How good a cut between the words `before` and `after` is: 0 before a phrase opener,
    1 a plain word boundary, 2 after a word that binds to the next."""
    b, a = before.lower().strip(".,;:!?\"'()"), after.lower().strip(".,;:!?\"'()")
    if b in BINDS_TO_NEXT:
        return 2
    return 0 if a in PHRASE_OPENERS else 1
