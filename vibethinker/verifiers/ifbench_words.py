"""Word lists for the approximate IFBench check `words:start_verb` (see ifbench_text).

The reference asks nltk's perceptron tagger whether the first token is tagged VB*; offline we
use these lists instead. `COMMON_VERBS` are base forms (regular inflections are derived in
`ifbench_text`), `IRREGULAR_VERB_FORMS` the forms those rules cannot derive, and `NOT_VERBS`
words that the lists or the -ing/-ed rule would take for verbs but that the tagger, at the start
of a response, tags otherwise (modals are MD; "during", "nothing" ...).
"""

from __future__ import annotations

COMMON_VERBS = frozenset(
    """accept achieve acknowledge act adapt add address adjust admire admit adopt advise
    affect agree aim allow alter analyze analyse announce answer apologize appear apply appreciate
    approach approve argue arrange arrive ask assess assign assist assume attach attack attempt
    attend avoid bake balance ban base bathe battle beg behave believe belong blame blend block
    boil book borrow bother bounce breathe brighten browse brush build burn calculate call calm
    care carry carve cause celebrate challenge change charge chase check cheer chew choose
    clarify classify clean clear click climb close collaborate collect combine comfort command
    compare compete compile complain complete compose concentrate conclude conduct confirm
    connect consider contact contain continue contribute control convert convince cook copy
    count cover crack craft crawl create cross cry cultivate cure dance dare debate decide
    declare decorate dedicate define delay delete deliver demonstrate deny depend describe
    deserve design destroy detect determine develop die dig direct discover discuss dislike
    display dive divide document donate double doubt download drag draw dream dress drop dry
    earn edit educate elaborate embrace emphasize employ enable encourage end engage enhance
    enjoy ensure enter establish estimate evaluate examine exist expand expect experience
    experiment explain explore express extend face fail fasten fetch file fill finish fix
    flash float flow focus fold follow force forgive form formulate gather gaze generate glance
    grab greet grin guarantee guard guess guide handle hang happen harm hate head heal help
    highlight hike hop hope hug hunt hurry identify ignore illustrate imagine implement improve
    include increase indicate influence inform inspire install instruct intend introduce
    invent investigate invite involve iterate join joke judge jump kick kill kiss knock label
    land last laugh launch learn level lift like limit link list listen live load locate look
    love maintain manage mark match matter measure meet melt memorize mention mix monitor move
    multiply name need negotiate note notice observe obtain occur offer open operate order
    organize outline own paint park participate pass pause perform permit persuade pick place
    plan plant play please plug point pour practice practise praise pray predict prefer prepare
    present preserve press pretend prevent print proceed process produce promise promote
    protect prove provide publish pull pump punch push question race rain raise rank rate
    reach react read realize receive recognize recommend record reduce reflect refuse regard
    relax release rely remain remember remind remove repair repeat replace reply report
    request require rescue research reserve resolve respect respond rest restore retire return
    reveal review revise reward rewrite rinse roll rub ruin rush sail satisfy save scan scream
    search secure select serve settle share shine shop shout sign simplify skip slip smell
    smile solve sort spell spend split spray start stay step stir stop store study submit
    succeed suffer suggest summarize supply support suppose surprise surround suspect switch
    talk taste tell test thank think touch tour trace track trade train transfer transform
    translate travel treat try turn type understand unite unlock update upgrade urge use value
    verify visit vote wait walk want warm warn wash waste watch wave welcome whisper wish wonder
    work worry wrap write yell
    """.split()
)

IRREGULAR_VERB_FORMS = frozenset(
    """be am is are was were been being have has had having do does did done doing go goes
    went gone going get got gotten getting make made making take took taken taking give gave
    given giving come came coming see saw seen seeing know knew known knowing find found
    finding think thought feel felt keep kept let lets letting begin began begun beginning
    bring brought buy bought catch caught teach taught fight fought seek sought hold held
    stand stood understood leave left lose lost pay paid say said saying send sent sit sat
    sleep slept speak spoke spoken spend spent tell told win won wrote written write ran run
    running put putting set setting cut cutting hit hurt read meet met lead led grow grew grown
    rise rose risen drive drove driven eat ate eaten fall fell fallen fly flew flown forget
    forgot forgotten choose chose chosen break broke broken wake woke woken wear wore worn
    swim swam sing sang sung ring rang drink drank drunk shake shook shaken throw threw thrown
    draw drew drawn build built become became imagine picture consider discover explore
    embark envision craft unleash dive delve unlock step meet discover picture begin""".split()
)

NOT_VERBS = frozenset(
    """can could will would shall should may might must during nothing something everything
    anything thing things morning evening king red bed seed hundred kindred sacred wicked naked
    interesting amazing exciting notwithstanding ceiling today tomorrow yesterday tonight
    perhaps maybe sure yes yeah indeed however therefore thus hence meanwhile sometimes often
    always never also still certainly absolutely""".split()
)
