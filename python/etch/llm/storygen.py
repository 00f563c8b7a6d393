"""A deterministic generator of simple children's stories: the training text of etch's default
language model (``models/default``).

The text is the project's own: every story is built here from a small grammar (characters,
places, objects, feelings, actions, dialogue and a handful of story arcs), so it carries no
outside license.  Every word the grammar can emit is in Debian's ``/usr/share/dict/words``
(wamerican), compared case-folded with a trailing possessive ``'s`` dropped; the test
``tests/default_model/test_storygen.py`` checks every word list and template against it.

One story is one line of text (no newline inside), so a tokenizer trained line by line sees
whole stories.  Usage::

    python3 -m etch.llm.storygen --stories 40000 --seed 1 -o stories.txt

``generate(n, seed)`` returns the same stories for the same arguments on every machine: the
only source of randomness is a ``random.Random(seed)`` (Python's Mersenne Twister, whose
``random()``, ``randrange`` and ``choice`` are stable across versions for integer seeds).
"""

from __future__ import annotations

import argparse
import random
import re
import string
import sys
from typing import Dict, Iterator, List, Sequence

__all__ = ["generate", "story", "all_words", "template_strings", "WORD_RE", "words_of"]

# ---------------------------------------------------------------------------------------------
# The lexicon.  Names are only ones that wamerican lists.

GIRLS = ["Lily", "Mia", "Anna", "Lucy", "Sue", "Kate", "Sara", "Rose", "Zoe", "Emma", "Amy",
         "Ella", "Jane", "Molly", "Ruby", "Daisy", "Ann", "Grace"]
BOYS = ["Tom", "Sam", "Ben", "Max", "Tim", "Jack", "Leo", "Bob", "Dan", "Ned", "Jim", "Joe",
        "Ted", "Ray", "Carl", "Paul", "Mark", "Luke"]

# (noun phrase without article, pronoun set): animal friends
ANIMALS = ["dog", "cat", "bunny", "bird", "duck", "frog", "puppy", "kitten", "fox", "owl",
           "bear", "mouse", "squirrel", "turtle", "pig", "cow", "horse", "goat", "lamb",
           "hen", "bee", "fish", "deer", "monkey", "lion", "tiger", "rabbit", "sheep"]
ANIMAL_ADJ = ["little", "small", "big", "fluffy", "brown", "white", "gray", "tiny", "old",
              "young", "shy", "friendly", "funny", "sleepy", "happy", "spotted"]
ANIMAL_SOUND = {"dog": "barked", "puppy": "barked", "cat": "purred", "kitten": "purred",
                "bird": "sang", "duck": "quacked", "frog": "croaked", "owl": "hooted",
                "bear": "growled", "lion": "roared", "tiger": "roared", "cow": "mooed",
                "horse": "neighed", "goat": "bleated", "lamb": "bleated", "sheep": "bleated",
                "hen": "clucked", "bee": "buzzed", "mouse": "squeaked", "pig": "grunted",
                "monkey": "chattered"}

PLACES = ["park", "garden", "forest", "beach", "farm", "lake", "hill", "school", "yard",
          "river", "town", "meadow", "zoo", "library", "market", "playground", "pond",
          "field", "woods", "village", "barn", "kitchen", "house", "shop", "cave", "island"]
PLACE_THINGS = {
    "park": ["a big tree", "a bench", "the swings", "a slide", "a bush"],
    "garden": ["the flowers", "a big rock", "the fence", "a bush", "the roses"],
    "forest": ["a tall tree", "a log", "a big rock", "the ferns", "a bush"],
    "beach": ["the sand", "a big rock", "a boat", "the waves", "a bucket"],
    "farm": ["the hay", "the barn", "a fence", "a cart", "the corn"],
    "lake": ["a log", "the reeds", "a boat", "a big rock", "the dock"],
    "hill": ["a big rock", "a tree", "the grass", "a bush", "the path"],
    "school": ["a desk", "the door", "a shelf", "the chairs", "a box"],
    "yard": ["a bush", "the fence", "a box", "the grass", "a tree"],
    "river": ["a log", "the reeds", "a rock", "the bridge", "the grass"],
    "town": ["a bench", "the shop", "a cart", "the wall", "a box"],
    "meadow": ["the grass", "the flowers", "a rock", "a tree", "a log"],
    "zoo": ["a bench", "the gate", "a fence", "a tree", "a cart"],
    "library": ["a shelf", "a desk", "the chairs", "a table", "a box"],
    "market": ["a cart", "a table", "a box", "the stand", "a basket"],
    "playground": ["the slide", "the swings", "a bench", "the sand", "a tree"],
    "pond": ["the reeds", "a log", "a rock", "the grass", "a lily pad"],
    "field": ["the grass", "a rock", "a fence", "a tree", "the hay"],
    "woods": ["a log", "a tree", "a rock", "a bush", "the leaves"],
    "village": ["a bench", "the well", "a cart", "a wall", "a gate"],
    "barn": ["the hay", "a box", "a cart", "the door", "a bucket"],
    "kitchen": ["the table", "a chair", "the sink", "a box", "the door"],
    "house": ["the bed", "a chair", "the sofa", "a box", "the door"],
    "shop": ["a shelf", "a box", "the counter", "a basket", "a table"],
    "cave": ["a big rock", "a dark corner", "a stone", "a crack", "a pile of sticks"],
    "island": ["a palm tree", "the sand", "a big rock", "a boat", "a shell"],
}

OBJECTS = ["ball", "kite", "boat", "hat", "box", "book", "drum", "toy car", "balloon",
           "blanket", "shell", "key", "map", "teddy bear", "doll", "truck", "train", "bell",
           "cup", "scarf", "ring", "stone", "puzzle", "robot", "whistle", "rope", "bucket",
           "crayon", "coin", "feather", "flag", "lamp", "sock", "shoe", "basket", "spoon"]
OBJECT_ADJ = ["red", "blue", "green", "yellow", "shiny", "new", "old", "soft", "big",
              "little", "pretty", "pink", "purple", "golden", "striped", "round", "tiny"]
FOODS = ["cake", "cookies", "pie", "bread", "soup", "pancakes", "apples", "muffins",
         "sandwiches", "salad", "cupcakes", "pizza", "carrots", "berries", "cherries",
         "grapes", "honey", "jam"]

FEELINGS_GOOD = ["happy", "glad", "proud", "excited", "calm", "thankful", "cheerful"]
FEELINGS_BAD = ["sad", "upset", "worried", "scared", "lonely", "grumpy", "angry"]
FEARS = ["the dark", "thunder", "the big dog next door", "deep water", "the tall slide",
         "the loud wind", "bugs", "the old barn", "bad dreams", "the high swing"]
WEATHER = ["sunny", "warm", "bright", "windy", "cold", "rainy", "cloudy", "snowy"]
TIMES = ["One day", "One morning", "One sunny day", "One evening", "Last summer",
         "One cold morning", "On a warm day", "One afternoon", "One night", "One rainy day"]
OPENINGS = ["Once upon a time, there was", "Once there was", "There once was",
            "Long ago, there was", "Once upon a time, in a small town, there lived"]
KID_ADJ = ["little", "kind", "happy", "curious", "brave", "shy", "funny", "clever", "young",
           "quiet", "busy", "silly", "gentle", "small"]
KID_NOUN = {"girl": "she", "boy": "he"}
PLAY = ["play tag", "play with the ball", "build a sand castle", "fly a kite",
        "look for bugs", "jump in the puddles", "play hide and seek", "draw pictures",
        "sing songs", "pick flowers", "feed the ducks", "climb the hill", "read a book",
        "make a tower of blocks", "run in the grass", "splash in the water"]
LIKES = ["to run", "to sing", "to dance", "to paint", "to read", "to jump", "to play outside",
         "to help people", "to bake", "to swim", "to draw", "to climb trees", "to laugh",
         "to look at the stars", "to play with friends", "to explore"]
MORALS = ["Sharing makes everyone happy.", "It is good to help others.",
          "Friends are the best gift of all.", "Being brave is not the same as not being scared.",
          "When we work together, we can do hard things.", "It is good to say sorry.",
          "Being kind is always the right thing to do.", "A good friend is always there for you.",
          "It is fine to ask for help.", "Small things can make a big difference."]
ENDINGS = ["From that day on, {a} and {b} were the best of friends.",
           "{A} smiled all the way home.",
           "That night, {a} went to bed with a big smile.",
           "{A} never forgot that day.",
           "It was the best day ever.",
           "{A} and {b} played together until the sun went down.",
           "And they all lived happily ever after.",
           "{A} could not wait to do it again the next day."]

# (question, answer) pairs of dialogue; {o} is an object phrase
ASK = ["\"Can I play with your {o}?\" asked {b}.",
       "\"May I try your {o}, please?\" asked {b}.",
       "\"What a nice {o}!\" said {b}. \"Can I have a turn?\""]
SAY_NO = ["\"No, it is mine!\" said {a}.", "\"No, you might break it,\" said {a}.",
          "\"Not now,\" said {a}, and {pa} held the {o} close."]
SAY_YES = ["\"Yes, you can play with it too,\" said {a}.",
           "\"Here, let us play with it together,\" said {a}.",
           "\"Of course! Let us share it,\" said {a}."]
THANKS = ["\"Thank you!\" said {b}.", "\"Thank you so much,\" said {b} with a smile.",
          "{B} gave {a} a big hug."]
HELP_CRY = ["\"Help! Help!\" cried the {an}.", "The {an} was crying for help.",
            "\"Please help me,\" said the {an} in a small voice."]
STUCK = ["was stuck in a bush", "was stuck up in a tree", "had hurt its leg",
         "could not find its way home", "was caught in some string",
         "had fallen into a hole", "was cold and hungry"]
FIXES = {
    "was stuck in a bush": "{A} moved the branches one by one, and the {an} was free.",
    "was stuck up in a tree": "{A} got a ladder and helped the {an} climb down.",
    "had hurt its leg": "{A} put a soft cloth on its leg and gave it some water.",
    "could not find its way home": "{A} walked with the {an} until they found its home.",
    "was caught in some string": "{A} pulled the string away very slowly, and the {an} was free.",
    "had fallen into a hole": "{A} lay down on the grass and lifted the {an} out of the hole.",
    "was cold and hungry": "{A} gave the {an} some bread and a warm blanket.",
}
BUILD = ["a tower", "a sand castle", "a boat", "a fort", "a kite", "a bird house",
         "a snowman", "a cake", "a card for their mom", "a big picture"]
GO_WRONG = ["the wind blew it down", "it fell over", "a big wave washed it away",
            "it broke into two pieces", "the dog ran into it", "the rain made it wet"]

# ---------------------------------------------------------------------------------------------
# Helpers


def _an(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


class _Ctx:
    """The cast of one story and its fill-ins for templates."""

    def __init__(self, r: random.Random):
        self.r = r
        girl = r.random() < 0.5
        self.a = r.choice(GIRLS if girl else BOYS)
        self.pa, self.pa_obj, self.pa_pos = (("she", "her", "her") if girl else
                                             ("he", "him", "his"))
        other_girl = r.random() < 0.5
        pool = [n for n in (GIRLS if other_girl else BOYS) if n != self.a]
        self.b = r.choice(pool)
        self.pb = "she" if other_girl else "he"
        self.an = r.choice(ANIMALS)
        self.an_adj = r.choice(ANIMAL_ADJ)
        self.place = r.choice(PLACES)
        self.o = (r.choice(OBJECT_ADJ) + " " if r.random() < 0.6 else "") + r.choice(OBJECTS)
        self.food = r.choice(FOODS)
        self.parent = r.choice(["mom", "dad"])

    def f(self, template: str, **extra) -> str:
        d: Dict[str, str] = {"a": self.a, "A": self.a, "b": self.b, "B": self.b,
                             "pa": self.pa, "Pa": _cap(self.pa), "pa_obj": self.pa_obj,
                             "pa_pos": self.pa_pos, "Pa_pos": _cap(self.pa_pos),
                             "pb": self.pb, "Pb": _cap(self.pb), "an": self.an,
                             "place": self.place, "o": self.o, "food": self.food,
                             "parent": self.parent}
        d.update(extra)
        return template.format(**d)

    def pick(self, templates: Sequence[str], **extra) -> str:
        return self.f(self.r.choice(templates), **extra)


# ---------------------------------------------------------------------------------------------
# Story arcs: each returns a list of sentences.


def _intro(c: _Ctx) -> List[str]:
    r = c.r
    kind = "girl" if c.pa == "she" else "boy"
    s = ["%s %s named %s." % (r.choice(OPENINGS), _an(r.choice(KID_ADJ) + " " + kind), c.a)]
    s.append(c.pick(["{A} liked {like}.", "{A} loved {like} more than anything.",
                     "Every day, {a} wanted {like}."], like=r.choice(LIKES)))
    return s


def _arc_lost(c: _Ctx) -> List[str]:
    r = c.r
    s = _intro(c)
    s.append(c.pick(["{Pa} had {obj} that {pa} loved very much.",
                     "{A} had a favorite toy. It was {obj}."], obj=_an(c.o)))
    s.append(c.pick(["{time}, {a} took the {o} to the {place}.",
                     "{time}, {a} and {pa_pos} friend {b} went to the {place} with the {o}."],
                    time=r.choice(TIMES)))
    s.append(c.pick(["They played for a long time.", "The sun was {w} and the sky was blue.",
                     "They ran and laughed all day."], w=r.choice(["warm", "bright"])))
    s.append(c.pick(["When it was time to go home, {a} could not find the {o}.",
                     "Then {a} looked around. The {o} was gone!"]))
    s.append(c.pick(["{A} felt very {bad}.", "{A} was so {bad} that {pa} started to cry."],
                    bad=r.choice(["sad", "upset", "worried"])))
    s.append(c.pick(["\"Do not cry,\" said {b}. \"We will find it together.\"",
                     "\"Let us look for it,\" said {b}."]))
    spots = r.sample(PLACE_THINGS[c.place], 2)
    s.append("They looked near %s, but it was not there." % spots[0])
    s.append("Then they looked behind %s." % spots[1])
    s.append(c.pick(["There was the {o}!", "And there it was!",
                     "Something was there. It was the {o}!"]))
    s.append(c.pick(["{A} was so {good}. \"Thank you, {b}!\" {pa} said.",
                     "{A} hugged the {o} and then hugged {b}."], good=r.choice(FEELINGS_GOOD)))
    s.append(c.pick(ENDINGS))
    return s


def _arc_share(c: _Ctx) -> List[str]:
    r = c.r
    s = _intro(c)
    s.append(c.pick(["{time}, {pa_pos} {parent} gave {pa_obj} {obj}.",
                     "{time}, {a} found {obj} in a box."], time=r.choice(TIMES),
                    obj=_an(c.o)))
    s.append(c.pick(["{A} took it to the {place} to play.",
                     "{A} played with it at the {place} all morning."]))
    s.append(c.pick(["There {pa} saw {b}.", "At the {place}, {pa} met {b}."]))
    s.append(c.pick(ASK))
    s.append(c.pick(SAY_NO))
    s.append(c.pick(["{B} was sad and walked away.", "{B} looked down and did not say a word."]))
    s.append(c.pick(["{A} played alone, but it was not fun anymore.",
                     "Soon {a} felt {bad} too.", "{A} did not feel good inside."],
                    bad=r.choice(["sad", "lonely"])))
    s.append(c.pick(["{A} ran to {b}. \"I am sorry,\" {pa} said.",
                     "{A} thought about it and went to find {b}."]))
    s.append(c.pick(SAY_YES))
    s.append(c.pick(THANKS))
    s.append(c.pick(["They played with the {o} together, and it was much more fun.",
                     "They took turns with the {o} and laughed and laughed."]))
    if r.random() < 0.6:
        s.append(r.choice(MORALS))
    s.append(c.pick(ENDINGS))
    return s


def _arc_brave(c: _Ctx) -> List[str]:
    r = c.r
    fear = r.choice(FEARS)
    s = _intro(c)
    s.append(c.pick(["But {a} was scared of {fear}.", "There was one thing {a} did not like. "
                     "{Pa} was afraid of {fear}."], fear=fear))
    s.append(c.pick(["{time}, {a} had to be brave.", "{time}, {a} went to the {place} "
                     "with {pa_pos} {parent}."], time=r.choice(TIMES)))
    s.append(c.pick(["{A} held {pa_pos} {parent}'s hand tight.",
                     "{A} wanted to run home."]))
    s.append(c.pick(["\"I am scared,\" said {a}.", "\"I do not want to go,\" said {a}."]))
    s.append(c.pick(["\"It is fine to be scared,\" said {pa_pos} {parent}. \"I am right here "
                     "with you.\"", "{Pa_pos} {parent} smiled. \"You are braver than you "
                     "think,\" {parent_pr} said."], parent_pr="she" if c.parent == "mom"
                    else "he"))
    s.append(c.pick(["{A} took a deep breath.", "{A} closed {pa_pos} eyes and counted to "
                     "ten."]))
    s.append(c.pick(["Then {pa} took one small step, and then another.",
                     "Slowly, {a} walked forward."]))
    s.append(c.pick(["It was not so bad after all!", "Nothing bad happened.",
                     "Soon {a} was laughing."]))
    s.append(c.pick(["{A} felt very proud.", "\"I did it!\" shouted {a}."]))
    if r.random() < 0.5:
        s.append(MORALS[3])
    s.append(c.pick(ENDINGS))
    return s


def _arc_help(c: _Ctx) -> List[str]:
    r = c.r
    stuck = r.choice(STUCK)
    s = _intro(c)
    s.append(c.pick(["{time}, {a} was walking in the {place}.",
                     "{time}, {a} and {b} went to the {place} to {play}."],
                    time=r.choice(TIMES), play=r.choice(PLAY)))
    s.append(c.pick(["Suddenly, {pa} heard a small sound.",
                     "Then {pa} saw something move."]))
    s.append("It was %s. The %s %s." % (_an(c.an_adj + " " + c.an), c.an, stuck))
    s.append(c.pick(HELP_CRY))
    s.append(c.pick(["\"Do not worry, I will help you,\" said {a}.",
                     "{A} wanted to help right away."]))
    s.append(c.f(FIXES[stuck]))
    sound = ANIMAL_SOUND.get(c.an)
    if sound:
        s.append("The %s %s with joy." % (c.an, sound))
    s.append(c.pick(["\"Thank you for helping me,\" said the {an}.",
                     "The {an} was very happy and thanked {a}."]))
    s.append(c.pick(["After that, the {an} came to visit {a} every day.",
                     "{A} felt warm inside. Helping felt good.",
                     "The {an} and {a} became good friends."]))
    if r.random() < 0.5:
        s.append(MORALS[1])
    s.append(c.pick(ENDINGS))
    return s


def _arc_build(c: _Ctx) -> List[str]:
    r = c.r
    what = r.choice(BUILD)
    wrong = r.choice(GO_WRONG)
    s = _intro(c)
    s.append(c.pick(["{time}, {a} and {b} wanted to make {what}.",
                     "{time}, {a} had an idea. \"Let us make {what}!\" {pa} said to {b}."],
                    time=r.choice(TIMES), what=what))
    s.append(c.pick(["They worked very hard all morning.",
                     "They got everything they needed and started to work."]))
    s.append(c.pick(["It looked so good!", "Soon it was done, and it was beautiful."]))
    s.append("But then %s." % wrong)
    s.append(c.pick(["{A} was {bad}. \"Now we have to start again,\" {pa} said.",
                     "{A} and {b} were very {bad}."], bad=r.choice(["sad", "upset", "angry"])))
    s.append(c.pick(["\"Do not give up,\" said {b}. \"We can make it even better.\"",
                     "Then {b} smiled. \"Let us try again, together,\" {pb} said."]))
    s.append(c.pick(["This time, they helped each other.",
                     "So they started again, step by step."]))
    s.append(c.pick(["The new one was even better than the first.",
                     "When they were done, it was bigger and stronger than before."]))
    s.append(c.pick(["{A} and {b} were very {good}.", "They laughed and clapped their "
                     "hands."], good=r.choice(FEELINGS_GOOD)))
    if r.random() < 0.5:
        s.append(MORALS[4])
    s.append(c.pick(ENDINGS))
    return s


def _arc_rain(c: _Ctx) -> List[str]:
    r = c.r
    s = _intro(c)
    s.append(c.pick(["{time}, {a} wanted to go to the {place} to {play}.",
                     "{time}, {a} and {b} planned to {play} at the {place}."],
                    time=r.choice(TIMES[:8]), play=r.choice(PLAY)))
    s.append(c.pick(["But when {pa} looked out the window, it was raining.",
                     "But then big gray clouds came, and it started to rain."]))
    s.append(c.pick(["{A} was {bad}. \"Now we cannot go out,\" {pa} said.",
                     "{A} sat by the window and felt {bad}."], bad=r.choice(FEELINGS_BAD[:5])))
    s.append(c.pick(["Then {pa_pos} {parent} had an idea.",
                     "\"I know what we can do,\" said {pa_pos} {parent}."]))
    s.append(c.pick(["\"Let us bake some {food}!\"", "\"Let us build a fort with blankets!\"",
                     "\"Let us read a story and have some {food}.\""]))
    s.append(c.pick(["{A} jumped up. \"Yes!\" {pa} said.", "{A} smiled for the first "
                     "time that day."]))
    s.append(c.pick(["They had so much fun inside.", "The house was warm, and everything "
                     "smelled good.", "They laughed and played all afternoon."]))
    s.append(c.pick(["When the rain stopped, there was a big rainbow in the sky.",
                     "Later, the sun came out again."]))
    s.append(c.pick(["\"This was the best rainy day,\" said {a}.",
                     "{A} learned that a rainy day can be fun too."]))
    s.append(c.pick(ENDINGS))
    return s


def _arc_food(c: _Ctx) -> List[str]:
    r = c.r
    s = _intro(c)
    s.append(c.pick(["{time}, {a} saw some {food} on the table.",
                     "{time}, {pa_pos} {parent} made some {food}."], time=r.choice(TIMES)))
    s.append(c.pick(["They looked very good.", "They smelled so good."]))
    s.append(c.pick(["\"These are for later,\" said {pa_pos} {parent}.",
                     "\"Please wait until dinner,\" said {pa_pos} {parent}."]))
    s.append(c.pick(["But {a} could not wait.", "{A} wanted just one."]))
    s.append(c.pick(["When no one was looking, {pa} took one.",
                     "{A} took a big bite."]))
    s.append(c.pick(["Then {pa} took another, and another.",
                     "Soon there were only a few left."]))
    s.append(c.pick(["When {pa_pos} {parent} came back, {pa} saw the plate.",
                     "{Pa_pos} {parent} looked at the plate and then at {a}."]))
    s.append(c.pick(["{A} felt bad. \"I am sorry,\" {pa} said. \"I did not wait.\"",
                     "\"I am sorry,\" said {a} in a small voice."]))
    s.append(c.pick(["{Pa_pos} {parent} gave {pa_obj} a hug. \"Thank you for saying sorry,\" "
                     "{parent_pr} said.", "\"It is fine,\" said {pa_pos} {parent}. \"Next time, "
                     "please wait.\""], parent_pr="she" if c.parent == "mom" else "he"))
    s.append(c.pick(["At dinner, they all shared the rest of the {food}.",
                     "Then they made more {food} together."]))
    if r.random() < 0.5:
        s.append(MORALS[5])
    s.append(c.pick(ENDINGS))
    return s


ARCS = [_arc_lost, _arc_share, _arc_brave, _arc_help, _arc_build, _arc_rain, _arc_food]


def story(r: random.Random) -> str:
    """One story, drawn from `r`."""
    c = _Ctx(r)
    return " ".join(r.choice(ARCS)(c))


def generate(n: int, seed: int) -> Iterator[str]:
    """`n` stories from ``random.Random(seed)``."""
    r = random.Random(seed)
    for _ in range(n):
        yield story(r)


# ---------------------------------------------------------------------------------------------
# The vocabulary, for the dictionary test.

WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


def words_of(text: str) -> List[str]:
    """Words of `text` as the dictionary check sees them: runs of letters (an apostrophe
    inside a word kept), case-folded, a trailing possessive ``'s`` dropped."""
    out = []
    for w in WORD_RE.findall(text):
        w = w.lower()
        if w.endswith("'s"):
            w = w[:-2]
        out.append(w)
    return out


def template_strings() -> List[str]:
    """The strings of every word list and template (``{fields}`` unfilled).  The few literals
    written inside the arc functions are covered by the test's generated stories."""
    out: List[str] = []
    g = globals()
    for name, v in g.items():
        if name.startswith("_") or not name.isupper():
            continue
        if isinstance(v, list):
            out.extend(x for x in v if isinstance(x, str))
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(str(k))
                out.extend(x if isinstance(x, list) else [str(x)])
    return out


def all_words() -> List[str]:
    """The sorted words of every word list and template (``{fields}`` removed)."""
    fmt = string.Formatter()
    words = set()
    for t in template_strings():
        lit = "".join(part[0] for part in fmt.parse(t))
        words.update(words_of(lit))
    return sorted(words)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m etch.llm.storygen",
                                description="deterministic children's stories, one per line")
    p.add_argument("--stories", type=int, default=1000, help="how many (default 1000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("-o", "--output", default="-", help="file (default: stdout)")
    a = p.parse_args(argv)
    if a.stories < 0:
        p.error("--stories must be >= 0")
    out = sys.stdout if a.output == "-" else open(a.output, "w", encoding="utf-8", newline="\n")
    try:
        for s in generate(a.stories, a.seed):
            out.write(s + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
