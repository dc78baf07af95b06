"""The product taxonomy behind the synthetic catalogue.

Three verticals as in the case study (fashion, beauty, life), a three-level category path per leaf, and for each leaf
the words sellers use for it in Korean and English. ``weight`` sets the leaf's share of the catalogue: fashion has
years of listings, beauty and life were added later and are sparser (the long tail).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Leaf:
    path: str  # "fashion > women > dress"
    ko: tuple[str, ...]
    en: tuple[str, ...]
    attrs: tuple[str, ...]  # attribute pools that suit the leaf (keys of ATTRIBUTES)
    weight: float
    confusable: tuple[str, ...] = field(default=())  # nouns shared with neighbouring leaves

    @property
    def vertical(self) -> str:
        return self.path.split(" > ")[0]


CLOTHES = ("color", "material", "fit", "size", "season")
SHOES = ("color", "material", "shoe_size")
BAGS = ("color", "material")
JEWEL = ("metal", "color")
SKIN = ("volume", "skin", "effect")
MAKEUP = ("shade", "finish", "volume")
HOME = ("color", "material_home", "home_size")


def _leaf(path, ko, en, attrs, weight, confusable=()):
    return Leaf(path, tuple(ko), tuple(en), attrs, weight, tuple(confusable))


LEAVES: tuple[Leaf, ...] = (
    # fashion: the bulk of the catalogue
    _leaf(
        "fashion > women > dress",
        ["원피스", "롱원피스", "미니원피스", "셔츠원피스"],
        ["dress", "maxi dress", "mini dress"],
        CLOTHES,
        9.0,
        ["니트원피스"],
    ),
    _leaf(
        "fashion > women > blouse",
        ["블라우스", "쉬폰블라우스", "프릴블라우스"],
        ["blouse", "chiffon blouse"],
        CLOTHES,
        6.5,
    ),
    _leaf(
        "fashion > women > skirt",
        ["스커트", "치마", "플리츠스커트", "롱스커트"],
        ["skirt", "pleated skirt", "midi skirt"],
        CLOTHES,
        6.0,
    ),
    _leaf(
        "fashion > women > knit",
        ["니트", "스웨터", "가디건", "니트조끼"],
        ["knit", "sweater", "cardigan"],
        CLOTHES,
        6.0,
        ["니트원피스", "가디건"],
    ),
    _leaf(
        "fashion > women > t-shirt",
        ["티셔츠", "반팔티", "긴팔티", "크롭티"],
        ["t-shirt", "tee", "crop top"],
        CLOTHES,
        7.0,
        ["맨투맨"],
    ),
    _leaf(
        "fashion > women > pants",
        ["슬랙스", "와이드팬츠", "조거팬츠", "바지"],
        ["slacks", "wide pants", "trousers"],
        CLOTHES,
        6.0,
    ),
    _leaf(
        "fashion > women > jeans",
        ["청바지", "데님팬츠", "부츠컷진"],
        ["jeans", "denim pants", "bootcut jeans"],
        CLOTHES,
        5.0,
        ["데님"],
    ),
    _leaf(
        "fashion > women > coat",
        ["코트", "롱코트", "핸드메이드코트", "트렌치코트"],
        ["coat", "trench coat", "wool coat"],
        CLOTHES,
        4.0,
    ),
    _leaf(
        "fashion > women > jacket",
        ["자켓", "재킷", "블레이저", "데님자켓"],
        ["jacket", "blazer", "denim jacket"],
        CLOTHES,
        4.5,
        ["가디건", "데님"],
    ),
    _leaf(
        "fashion > women > padding",
        ["패딩", "숏패딩", "롱패딩", "경량패딩"],
        ["puffer", "down jacket", "padded jacket"],
        CLOTHES,
        3.0,
    ),
    _leaf(
        "fashion > men > shirt", ["남자셔츠", "옥스포드셔츠", "남성셔츠"], ["men's shirt", "oxford shirt"], CLOTHES, 3.0
    ),
    _leaf(
        "fashion > men > hoodie",
        ["후드티", "후드집업", "맨투맨"],
        ["hoodie", "sweatshirt", "zip-up hoodie"],
        CLOTHES,
        3.5,
        ["맨투맨"],
    ),
    _leaf(
        "fashion > shoes > sneakers",
        ["스니커즈", "운동화", "캔버스화"],
        ["sneakers", "trainers", "canvas shoes"],
        SHOES,
        4.0,
    ),
    _leaf("fashion > shoes > heels", ["힐", "펌프스", "구두", "미들힐"], ["heels", "pumps", "stilettos"], SHOES, 2.5),
    _leaf(
        "fashion > shoes > boots",
        ["부츠", "앵클부츠", "롱부츠", "워커"],
        ["boots", "ankle boots", "chelsea boots"],
        SHOES,
        2.5,
    ),
    _leaf("fashion > shoes > sandals", ["샌들", "슬리퍼", "뮬", "쪼리"], ["sandals", "slides", "mules"], SHOES, 2.0),
    _leaf(
        "fashion > bags > tote", ["토트백", "숄더백", "에코백"], ["tote bag", "shoulder bag", "canvas tote"], BAGS, 2.5
    ),
    _leaf(
        "fashion > bags > crossbody",
        ["크로스백", "미니백", "메신저백"],
        ["crossbody bag", "mini bag", "sling bag"],
        BAGS,
        2.0,
    ),
    _leaf(
        "fashion > bags > backpack",
        ["백팩", "책가방", "노트북가방"],
        ["backpack", "rucksack", "laptop backpack"],
        BAGS,
        1.5,
    ),
    _leaf(
        "fashion > accessories > earrings",
        ["귀걸이", "이어링", "피어싱", "귀찌"],
        ["earrings", "hoop earrings", "ear cuff"],
        JEWEL,
        3.0,
    ),
    _leaf(
        "fashion > accessories > necklace",
        ["목걸이", "초커", "펜던트목걸이"],
        ["necklace", "choker", "pendant"],
        JEWEL,
        2.0,
    ),
    _leaf(
        "fashion > accessories > hat",
        ["모자", "볼캡", "버킷햇", "비니"],
        ["cap", "bucket hat", "beanie"],
        ("color", "material"),
        2.0,
    ),
    _leaf(
        "fashion > accessories > socks",
        ["양말", "니삭스", "덧신"],
        ["socks", "knee socks", "ankle socks"],
        ("color", "material"),
        1.5,
    ),
    # beauty: added later, sparser
    _leaf("beauty > skincare > toner", ["토너", "스킨", "토너패드"], ["toner", "toner pad"], SKIN, 1.2, ["스킨"]),
    _leaf("beauty > skincare > serum", ["세럼", "앰플", "에센스"], ["serum", "ampoule", "essence"], SKIN, 1.1),
    _leaf(
        "beauty > skincare > cream",
        ["크림", "수분크림", "아이크림"],
        ["cream", "moisturizer", "eye cream"],
        SKIN,
        1.0,
        ["크림"],
    ),
    _leaf(
        "beauty > skincare > sunscreen",
        ["선크림", "선스틱", "자외선차단제"],
        ["sunscreen", "sun stick", "SPF50+ sunblock"],
        SKIN,
        0.8,
    ),
    _leaf(
        "beauty > skincare > cleanser",
        ["클렌징폼", "클렌징오일", "폼클렌저"],
        ["cleansing foam", "cleansing oil", "face wash"],
        SKIN,
        0.7,
    ),
    _leaf(
        "beauty > makeup > lip", ["립스틱", "립틴트", "립글로스"], ["lipstick", "lip tint", "lip gloss"], MAKEUP, 1.0
    ),
    _leaf(
        "beauty > makeup > base", ["쿠션", "파운데이션", "컨실러"], ["cushion", "foundation", "concealer"], MAKEUP, 0.8
    ),
    _leaf(
        "beauty > makeup > eye",
        ["마스카라", "아이라이너", "아이섀도우 팔레트"],
        ["mascara", "eyeliner", "eyeshadow palette"],
        MAKEUP,
        0.6,
    ),
    _leaf(
        "beauty > hair > shampoo",
        ["샴푸", "트리트먼트", "헤어에센스"],
        ["shampoo", "hair treatment", "hair oil"],
        ("volume", "effect"),
        0.5,
    ),
    _leaf(
        "beauty > body > body-care",
        ["바디로션", "바디워시", "핸드크림"],
        ["body lotion", "body wash", "hand cream"],
        ("volume", "effect"),
        0.4,
        ["크림"],
    ),
    _leaf(
        "beauty > fragrance > perfume",
        ["향수", "오드퍼퓸", "바디미스트"],
        ["perfume", "eau de parfum", "body mist"],
        ("volume",),
        0.3,
    ),
    # life: the sparsest vertical
    _leaf(
        "life > kitchen > tumbler",
        ["텀블러", "머그컵", "보온병"],
        ["tumbler", "mug", "thermos"],
        ("color", "volume"),
        0.7,
    ),
    _leaf(
        "life > kitchen > cookware",
        ["프라이팬", "냄비", "웍"],
        ["frying pan", "pot", "wok"],
        ("home_size", "material_home"),
        0.5,
    ),
    _leaf(
        "life > kitchen > tableware",
        ["접시", "그릇", "식기세트"],
        ["plate", "bowl", "dinnerware set"],
        ("color", "material_home"),
        0.5,
    ),
    _leaf("life > bedding > blanket", ["이불", "담요", "차렵이불"], ["comforter", "blanket", "duvet"], HOME, 0.5),
    _leaf(
        "life > bedding > pillow",
        ["베개", "쿠션", "바디필로우"],
        ["pillow", "cushion", "body pillow"],
        HOME,
        0.35,
        ["쿠션"],
    ),
    _leaf(
        "life > interior > lighting",
        ["무드등", "스탠드조명", "LED조명"],
        ["mood light", "desk lamp", "LED light"],
        ("color", "home_size"),
        0.3,
    ),
    _leaf("life > interior > rug", ["러그", "카페트", "발매트"], ["rug", "carpet", "bath mat"], HOME, 0.25),
    _leaf(
        "life > interior > candle",
        ["캔들", "디퓨저", "향초"],
        ["candle", "diffuser", "scented candle"],
        ("volume", "color"),
        0.25,
    ),
    _leaf(
        "life > digital > phone-case",
        ["폰케이스", "아이폰케이스", "갤럭시케이스"],
        ["phone case", "iPhone case", "Galaxy case"],
        ("color", "material"),
        0.6,
    ),
    _leaf(
        "life > storage > organizer",
        ["수납함", "정리함", "리빙박스"],
        ["storage box", "organizer", "storage basket"],
        ("color", "home_size"),
        0.2,
    ),
)

ATTRIBUTES: dict[str, tuple[tuple[str, str], ...]] = {
    # (Korean, English) pairs; a title uses one side or mixes them
    "color": (
        ("블랙", "black"),
        ("화이트", "white"),
        ("아이보리", "ivory"),
        ("베이지", "beige"),
        ("네이비", "navy"),
        ("그레이", "grey"),
        ("핑크", "pink"),
        ("카키", "khaki"),
        ("브라운", "brown"),
        ("스카이블루", "sky blue"),
        ("레드", "red"),
        ("민트", "mint"),
    ),
    "material": (
        ("면", "cotton"),
        ("린넨", "linen"),
        ("울", "wool"),
        ("캐시미어", "cashmere"),
        ("가죽", "leather"),
        ("데님", "denim"),
        ("폴리", "polyester"),
        ("실크", "silk"),
        ("코듀로이", "corduroy"),
    ),
    "fit": (
        ("오버핏", "oversized"),
        ("슬림핏", "slim fit"),
        ("루즈핏", "loose fit"),
        ("세미오버", "semi-over"),
        ("하이웨스트", "high-waist"),
        ("A라인", "A-line"),
    ),
    "size": (
        ("FREE", "FREE"),
        ("S", "S"),
        ("M", "M"),
        ("L", "L"),
        ("XL", "XL"),
        ("55-77", "55-77"),
        ("빅사이즈", "plus size"),
    ),
    "season": (
        ("봄", "spring"),
        ("여름", "summer"),
        ("가을", "autumn"),
        ("겨울", "winter"),
        ("간절기", "transitional"),
    ),
    "shoe_size": (
        ("225", "225mm"),
        ("230", "230mm"),
        ("235", "235mm"),
        ("240", "240mm"),
        ("250", "250mm"),
        ("270", "270mm"),
    ),
    "metal": (
        ("실버925", "925 silver"),
        ("14K", "14K gold"),
        ("써지컬스틸", "surgical steel"),
        ("진주", "pearl"),
        ("큐빅", "cubic"),
    ),
    "volume": (
        ("30ml", "30ml"),
        ("50ml", "50ml"),
        ("100ml", "100ml"),
        ("200ml", "200ml"),
        ("500ml", "500ml"),
        ("1+1", "1+1"),
    ),
    "skin": (("지성", "oily skin"), ("건성", "dry skin"), ("민감성", "sensitive skin"), ("복합성", "combination skin")),
    "effect": (
        ("수분", "hydrating"),
        ("진정", "soothing"),
        ("미백", "brightening"),
        ("주름개선", "anti-wrinkle"),
        ("비건", "vegan"),
    ),
    "shade": (("01호", "#01"), ("21호", "#21"), ("23호", "#23"), ("코랄", "coral"), ("로즈", "rose"), ("MLBB", "MLBB")),
    "finish": (("매트", "matte"), ("글로우", "glow"), ("벨벳", "velvet"), ("촉촉", "dewy")),
    "material_home": (
        ("스테인리스", "stainless"),
        ("세라믹", "ceramic"),
        ("원목", "solid wood"),
        ("극세사", "microfiber"),
        ("면100%", "100% cotton"),
        ("유리", "glass"),
    ),
    "home_size": (
        ("싱글", "single"),
        ("퀸", "queen"),
        ("킹", "king"),
        ("대형", "large"),
        ("소형", "small"),
        ("28cm", "28cm"),
    ),
}

BRANDS = {
    "fashion": (
        "모던로브",
        "MODERN ROBE",
        "데일리앤",
        "DAILY&",
        "르블랑",
        "LE BLANC",
        "어반핏",
        "URBANFIT",
        "소피아",
        "SOFIA",
        "블루밍데이",
        "BLOOMING DAY",
        "노마드",
        "NOMAD",
        "하루의옷",
        "OFFDUTY",
        "미니멀리스트",
        "MINIMALIST",
    ),
    "beauty": (
        "라온뷰티",
        "RAON",
        "그린랩",
        "GREENLAB",
        "클리어미",
        "CLEARME",
        "루미에르",
        "LUMIERE",
        "닥터스킨",
        "DR.SKIN",
    ),
    "life": ("홈앤리빙", "HOME&LIVING", "무드하우스", "MOODHOUSE", "키친플러스", "KITCHEN+", "코지룸", "COZYROOM"),
}

PROMO_TAGS = (
    "[무료배송]",
    "[당일출고]",
    "[1+1]",
    "[특가]",
    "[신상]",
    "[BEST]",
    "(~50%)",
    "[주문폭주]",
    "[재입고]",
    "[FREE SHIPPING]",
    "[SALE]",
    "[NEW]",
    "★오늘출발★",
    "[단독]",
    "[한정수량]",
)

STYLE_WORDS = (
    ("데일리", "daily"),
    ("베이직", "basic"),
    ("러블리", "lovely"),
    ("시크", "chic"),
    ("빈티지", "vintage"),
    ("캐주얼", "casual"),
    ("오피스룩", "office look"),
    ("하객룩", "wedding guest"),
    ("커플", "couple"),
    ("선물용", "gift"),
    ("인기", "popular"),
    ("꾸안꾸", "effortless"),
)
