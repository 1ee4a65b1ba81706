"""Build the demo KG that kgqa ships: ``triples.tsv``, ``names.tsv`` and ``questions.jsonl`` next to this file.

The facts are public knowledge about films, people, places and the Academy Awards, written down below as plain Python
data. Entity ids follow the Freebase grammar (``m.0demo_<slug>``) but are synthetic, not real Freebase MIDs. Relations
are real Freebase relation names; mediator (CVT) nodes are nameless, as in Freebase.

Run ``python build_demo.py`` (no kgqa import needed). The output is deterministic. Before writing, a self-check executes
every question's gold chain (and constraint) over the triples with a plain Python interpreter and stops with an error if
the result differs from the hand-written gold answers, so a wrong fact or a wrong question cannot ship unnoticed.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
XSD = "http://www.w3.org/2001/XMLSchema#"
PREFIX = "m.0demo_"
ID_RE = re.compile(r"^[mg]\.[0-9a-z_]+$")

# ============================================================================================================
# Places
# ============================================================================================================

CONTINENTS = {
    "europe": "Europe", "north_america": "North America", "asia": "Asia", "africa": "Africa", "oceania": "Oceania",
}

# key: (name, continent, capital city keys, currency key, official language keys)
COUNTRIES = {
    "usa": ("United States of America", "north_america", ["washington_dc"], "us_dollar", []),
    "uk": ("United Kingdom", "europe", ["london"], "pound_sterling", []),
    "canada": ("Canada", "north_america", ["ottawa"], "canadian_dollar", ["english", "french"]),
    "mexico": ("Mexico", "north_america", ["mexico_city"], "mexican_peso", []),
    "france": ("France", "europe", ["paris"], "euro", ["french"]),
    "germany": ("Germany", "europe", ["berlin"], "euro", ["german"]),
    "italy": ("Italy", "europe", ["rome"], "euro", ["italian"]),
    "spain": ("Spain", "europe", ["madrid"], "euro", ["spanish"]),
    "ireland": ("Ireland", "europe", ["dublin"], "euro", ["irish", "english"]),
    "austria": ("Austria", "europe", ["vienna"], "euro", ["german"]),
    "greece": ("Greece", "europe", ["athens"], "euro", ["greek"]),
    "sweden": ("Sweden", "europe", ["stockholm"], "swedish_krona", ["swedish"]),
    "denmark": ("Denmark", "europe", ["copenhagen"], "danish_krone", ["danish"]),
    "japan": ("Japan", "asia", ["tokyo"], "japanese_yen", []),
    "south_korea": ("South Korea", "asia", ["seoul"], "south_korean_won", ["korean"]),
    "china": ("China", "asia", ["beijing"], "renminbi", ["standard_chinese"]),
    "taiwan": ("Taiwan", "asia", ["taipei"], "new_taiwan_dollar", []),
    "india": ("India", "asia", ["new_delhi"], "indian_rupee", ["hindi", "english"]),
    "lebanon": ("Lebanon", "asia", ["beirut"], "lebanese_pound", ["arabic"]),
    "malaysia": ("Malaysia", "asia", ["kuala_lumpur"], "malaysian_ringgit", ["malay"]),
    "australia": ("Australia", "oceania", ["canberra"], "australian_dollar", []),
    "new_zealand": ("New Zealand", "oceania", ["wellington"], "new_zealand_dollar", []),
    "south_africa": ("South Africa", "africa", ["pretoria", "cape_town", "bloemfontein"], "south_african_rand", []),
    "kenya": ("Kenya", "africa", ["nairobi"], "kenyan_shilling", ["english", "swahili"]),
}

CURRENCIES = {
    "us_dollar": "United States Dollar", "pound_sterling": "Pound sterling", "canadian_dollar": "Canadian dollar",
    "mexican_peso": "Mexican peso", "euro": "Euro", "swedish_krona": "Swedish krona", "danish_krone": "Danish krone",
    "japanese_yen": "Japanese yen", "south_korean_won": "South Korean won", "renminbi": "Renminbi",
    "new_taiwan_dollar": "New Taiwan dollar", "indian_rupee": "Indian rupee", "lebanese_pound": "Lebanese pound",
    "malaysian_ringgit": "Malaysian ringgit", "australian_dollar": "Australian dollar",
    "new_zealand_dollar": "New Zealand dollar", "south_african_rand": "South African rand",
    "kenyan_shilling": "Kenyan shilling",
}

LANGUAGES = {
    "english": "English Language", "french": "French Language", "spanish": "Spanish Language",
    "german": "German Language", "italian": "Italian Language", "irish": "Irish Language", "greek": "Greek Language",
    "swedish": "Swedish Language", "danish": "Danish Language",
    "korean": "Korean Language", "standard_chinese": "Standard Chinese", "hindi": "Hindi Language",
    "arabic": "Arabic Language", "malay": "Malay Language", "swahili": "Swahili Language",
}

# First-level divisions: key: (name, country). Cities are contained in one of these or directly in a country.
DIVISIONS = {
    "california": ("California", "usa"), "new_york_state": ("New York", "usa"), "ohio": ("Ohio", "usa"),
    "tennessee": ("Tennessee", "usa"), "michigan": ("Michigan", "usa"), "colorado": ("Colorado", "usa"),
    "minnesota": ("Minnesota", "usa"), "oklahoma": ("Oklahoma", "usa"), "illinois": ("Illinois", "usa"),
    "maryland": ("Maryland", "usa"), "texas": ("Texas", "usa"),
    "rhode_island": ("Rhode Island", "usa"), "nebraska": ("Nebraska", "usa"),
    "massachusetts": ("Massachusetts", "usa"), "new_jersey": ("New Jersey", "usa"),
    "pennsylvania": ("Pennsylvania", "usa"), "iowa": ("Iowa", "usa"), "kentucky": ("Kentucky", "usa"),
    "arizona": ("Arizona", "usa"), "virginia": ("Virginia", "usa"),
    "indiana": ("Indiana", "usa"), "wisconsin": ("Wisconsin", "usa"),
    "montana": ("Montana", "usa"),
    "england": ("England", "uk"), "wales": ("Wales", "uk"),
    "northern_ireland": ("Northern Ireland", "uk"),
    "ontario": ("Ontario", "canada"), "nova_scotia": ("Nova Scotia", "canada"),
    "new_south_wales": ("New South Wales", "australia"), "victoria_au": ("Victoria", "australia"),
    "western_australia": ("Western Australia", "australia"),
    "jalisco": ("Jalisco", "mexico"),
}

# Cities: key: (name, parent). The parent is a division or a country.
CITIES = {
    # United States
    "washington_dc": ("Washington, D.C.", "usa"), "los_angeles": ("Los Angeles", "california"),
    "san_francisco": ("San Francisco", "california"), "sacramento": ("Sacramento", "california"),
    "san_carlos": ("San Carlos", "california"), "modesto": ("Modesto", "california"),
    "concord_ca": ("Concord", "california"), "oakland": ("Oakland", "california"),
    "pasadena": ("Pasadena", "california"), "berkeley": ("Berkeley", "california"),
    "san_bernardino": ("San Bernardino", "california"), "new_york_city": ("New York City", "new_york_state"),
    "mount_vernon": ("Mount Vernon", "new_york_state"), "cincinnati": ("Cincinnati", "ohio"),
    "dayton": ("Dayton", "ohio"), "knoxville": ("Knoxville", "tennessee"), "memphis": ("Memphis", "tennessee"),
    "detroit": ("Detroit", "michigan"), "denver": ("Denver", "colorado"),
    "st_louis_park": ("St. Louis Park", "minnesota"), "shawnee": ("Shawnee", "oklahoma"),
    "chicago": ("Chicago", "illinois"), "gibson_city": ("Gibson City", "illinois"),
    "salisbury_md": ("Salisbury", "maryland"), "uvalde": ("Uvalde", "texas"), "terrell": ("Terrell", "texas"),
    "san_saba": ("San Saba", "texas"), "austin": ("Austin", "texas"), "providence": ("Providence", "rhode_island"),
    "omaha": ("Omaha", "nebraska"), "lincoln_nebraska": ("Lincoln", "nebraska"),
    "boston": ("Boston", "massachusetts"), "cambridge_ma": ("Cambridge", "massachusetts"),
    "newark": ("Newark", "new_jersey"), "englewood": ("Englewood", "new_jersey"),
    "south_orange": ("South Orange", "new_jersey"), "philadelphia": ("Philadelphia", "pennsylvania"),
    "indiana_pa": ("Indiana", "pennsylvania"), "cedar_rapids": ("Cedar Rapids", "iowa"),
    "lexington": ("Lexington", "kentucky"), "scottsdale": ("Scottsdale", "arizona"),
    "arlington": ("Arlington", "virginia"), "indianapolis": ("Indianapolis", "indiana"),
    "kenosha": ("Kenosha", "wisconsin"), "missoula": ("Missoula", "montana"),
    # United Kingdom
    "london": ("London", "england"), "south_shields": ("South Shields", "england"), "reading": ("Reading", "england"),
    "burnley": ("Burnley", "england"), "ipswich": ("Ipswich", "england"), "bristol": ("Bristol", "england"),
    "haverfordwest": ("Haverfordwest", "wales"), "port_talbot": ("Port Talbot", "wales"),
    "swansea": ("Swansea", "wales"), "ballymena": ("Ballymena", "northern_ireland"),
    "omagh": ("Omagh", "northern_ireland"),
    # Canada
    "ottawa": ("Ottawa", "ontario"), "kapuskasing": ("Kapuskasing", "ontario"),
    "london_ontario": ("London", "ontario"), "halifax": ("Halifax", "nova_scotia"),
    # Australia and New Zealand
    "canberra": ("Canberra", "australia"), "sydney": ("Sydney", "new_south_wales"),
    "melbourne": ("Melbourne", "victoria_au"), "perth": ("Perth", "western_australia"),
    "wellington": ("Wellington", "new_zealand"),
    # Europe
    "dublin": ("Dublin", "ireland"), "cork": ("Cork", "ireland"), "paris": ("Paris", "france"),
    "berlin": ("Berlin", "germany"), "frankfurt": ("Frankfurt", "germany"), "rome": ("Rome", "italy"),
    "madrid": ("Madrid", "spain"), "las_palmas": ("Las Palmas", "spain"), "vienna": ("Vienna", "austria"),
    "thal": ("Thal", "austria"), "athens": ("Athens", "greece"), "stockholm": ("Stockholm", "sweden"),
    "copenhagen": ("Copenhagen", "denmark"),
    # Rest of the world
    "mexico_city": ("Mexico City", "mexico"), "guadalajara": ("Guadalajara", "jalisco"), "tokyo": ("Tokyo", "japan"),
    "seoul": ("Seoul", "south_korea"), "daegu": ("Daegu", "south_korea"), "beijing": ("Beijing", "china"),
    "taipei": ("Taipei", "taiwan"), "new_delhi": ("New Delhi", "india"), "beirut": ("Beirut", "lebanon"),
    "kuala_lumpur": ("Kuala Lumpur", "malaysia"), "ipoh": ("Ipoh", "malaysia"),
    "pretoria": ("Pretoria", "south_africa"), "cape_town": ("Cape Town", "south_africa"),
    "bloemfontein": ("Bloemfontein", "south_africa"), "nairobi": ("Nairobi", "kenya"),
    # Puerto Rico is a US territory, not a state; it is contained in the United States directly.
    "san_juan": ("San Juan", "puerto_rico"),
}
TERRITORIES = {"puerto_rico": ("Puerto Rico", "usa")}

# ============================================================================================================
# People
# ============================================================================================================

# key: (name, date of birth or "", place of birth or "", nationalities)
# Only facts we are sure of: a date or place left empty is unknown here, not absent in the world.
PEOPLE = {
    # --- directors ------------------------------------------------------------------------------------------
    "christopher_nolan": ("Christopher Nolan", "1970-07-30", "london", "uk"),
    "jonathan_nolan": ("Jonathan Nolan", "", "london", "uk"),
    "emma_thomas": ("Emma Thomas", "", "", "uk"),
    "steven_spielberg": ("Steven Spielberg", "1946-12-18", "cincinnati", "usa"),
    "martin_scorsese": ("Martin Scorsese", "1942-11-17", "new_york_city", "usa"),
    "quentin_tarantino": ("Quentin Tarantino", "1963-03-27", "knoxville", "usa"),
    "alfred_hitchcock": ("Alfred Hitchcock", "1899-08-13", "london", "uk usa"),
    "francis_ford_coppola": ("Francis Ford Coppola", "1939-04-07", "detroit", "usa"),
    "james_cameron": ("James Cameron", "1954-08-16", "kapuskasing", "canada"),
    "ridley_scott": ("Ridley Scott", "1937-11-30", "south_shields", "uk"),
    "denis_villeneuve": ("Denis Villeneuve", "1967-10-03", "", "canada"),
    "peter_jackson": ("Peter Jackson", "1961-10-31", "", "new_zealand"),
    "clint_eastwood": ("Clint Eastwood", "1930-05-31", "san_francisco", "usa"),
    "david_fincher": ("David Fincher", "1962-08-28", "denver", "usa"),
    "joel_coen": ("Joel Coen", "1954-11-29", "st_louis_park", "usa"),
    "ethan_coen": ("Ethan Coen", "1957-09-21", "st_louis_park", "usa"),
    "guillermo_del_toro": ("Guillermo del Toro", "1964-10-09", "guadalajara", "mexico"),
    "alfonso_cuaron": ("Alfonso Cuarón", "1961-11-28", "mexico_city", "mexico"),
    "alejandro_gonzalez_inarritu": ("Alejandro González Iñárritu", "1963-08-15", "mexico_city", "mexico"),
    "bong_joon_ho": ("Bong Joon-ho", "1969-09-14", "daegu", "south_korea"),
    "kathryn_bigelow": ("Kathryn Bigelow", "1951-11-27", "san_carlos", "usa"),
    "ang_lee": ("Ang Lee", "1954-10-23", "", "taiwan"),
    "sam_mendes": ("Sam Mendes", "1965-08-01", "reading", "uk"),
    "jonathan_demme": ("Jonathan Demme", "1944-02-22", "", "usa"),
    "tom_hooper": ("Tom Hooper", "", "london", "uk"),
    "michel_hazanavicius": ("Michel Hazanavicius", "1967-03-29", "paris", "france"),
    "damien_chazelle": ("Damien Chazelle", "1985-01-19", "providence", "usa"),
    "chloe_zhao": ("Chloé Zhao", "1982-03-31", "beijing", "china"),
    "jane_campion": ("Jane Campion", "1954-04-30", "wellington", "new_zealand"),
    "daniel_kwan": ("Daniel Kwan", "", "", "usa"),
    "daniel_scheinert": ("Daniel Scheinert", "", "", "usa"),
    "george_lucas": ("George Lucas", "1944-05-14", "modesto", "usa"),
    "lana_wachowski": ("Lana Wachowski", "1965-06-21", "chicago", "usa"),
    "lilly_wachowski": ("Lilly Wachowski", "1967-12-29", "chicago", "usa"),
    "david_lynch": ("David Lynch", "1946-01-20", "missoula", "usa"),
    "jim_sheridan": ("Jim Sheridan", "", "", "ireland"),
    "paul_thomas_anderson": ("Paul Thomas Anderson", "", "", "usa"),
    "scott_cooper": ("Scott Cooper", "", "", "usa"),
    "darren_aronofsky": ("Darren Aronofsky", "", "", "usa"),
    "ben_affleck": ("Ben Affleck", "1972-08-15", "berkeley", "usa"),
    "steve_mcqueen_director": ("Steve McQueen", "", "london", "uk"),
    "jean_marc_vallee": ("Jean-Marc Vallée", "", "", "canada"),
    "james_marsh": ("James Marsh", "", "", "uk"),
    "tom_mccarthy": ("Tom McCarthy", "", "", "usa"),
    "barry_jenkins": ("Barry Jenkins", "", "", "usa"),
    "kenneth_lonergan": ("Kenneth Lonergan", "", "", "usa"),
    "joe_wright": ("Joe Wright", "", "", "uk"),
    "peter_farrelly": ("Peter Farrelly", "", "", "usa"),
    "bryan_singer": ("Bryan Singer", "", "", "usa"),
    "todd_phillips": ("Todd Phillips", "", "", "usa"),
    "florian_zeller": ("Florian Zeller", "", "", "france"),
    "sian_heder": ("Sian Heder", "", "", "usa"),
    "reinaldo_marcus_green": ("Reinaldo Marcus Green", "", "", "usa"),
    # --- actors ---------------------------------------------------------------------------------------------
    "leonardo_dicaprio": ("Leonardo DiCaprio", "1974-11-11", "los_angeles", "usa"),
    "tom_hanks": ("Tom Hanks", "1956-07-09", "concord_ca", "usa"),
    "brad_pitt": ("Brad Pitt", "1963-12-18", "shawnee", "usa"),
    "matt_damon": ("Matt Damon", "1970-10-08", "cambridge_ma", "usa"),
    "robert_de_niro": ("Robert De Niro", "1943-08-17", "new_york_city", "usa"),
    "al_pacino": ("Al Pacino", "1940-04-25", "new_york_city", "usa"),
    "marlon_brando": ("Marlon Brando", "1924-04-03", "omaha", "usa"),
    "morgan_freeman": ("Morgan Freeman", "1937-06-01", "memphis", "usa"),
    "christian_bale": ("Christian Bale", "1974-01-30", "haverfordwest", "uk"),
    "michael_caine": ("Michael Caine", "1933-03-14", "london", "uk"),
    "heath_ledger": ("Heath Ledger", "1979-04-04", "perth", "australia"),
    "gary_oldman": ("Gary Oldman", "1958-03-21", "london", "uk"),
    "cillian_murphy": ("Cillian Murphy", "1976-05-25", "cork", "ireland"),
    "tom_hardy": ("Tom Hardy", "1977-09-15", "london", "uk"),
    "joseph_gordon_levitt": ("Joseph Gordon-Levitt", "1981-02-17", "los_angeles", "usa"),
    "elliot_page": ("Elliot Page", "1987-02-21", "halifax", "canada"),
    "anne_hathaway": ("Anne Hathaway", "1982-11-12", "new_york_city", "usa"),
    "matthew_mcconaughey": ("Matthew McConaughey", "1969-11-04", "uvalde", "usa"),
    "jessica_chastain": ("Jessica Chastain", "1977-03-24", "sacramento", "usa"),
    "hugh_jackman": ("Hugh Jackman", "1968-10-12", "sydney", "australia"),
    "maggie_gyllenhaal": ("Maggie Gyllenhaal", "1977-11-16", "new_york_city", "usa"),
    "guy_pearce": ("Guy Pearce", "", "", "australia"),
    "robin_williams": ("Robin Williams", "1951-07-21", "chicago", "usa"),
    "hilary_swank": ("Hilary Swank", "1974-07-30", "lincoln_nebraska", "usa"),
    "mark_rylance": ("Mark Rylance", "", "", "uk"),
    "john_david_washington": ("John David Washington", "", "", "usa"),
    "robert_pattinson": ("Robert Pattinson", "1986-05-13", "london", "uk"),
    "elizabeth_debicki": ("Elizabeth Debicki", "1990-08-24", "paris", "australia"),
    "emily_blunt": ("Emily Blunt", "1983-02-23", "london", "uk"),
    "robert_downey_jr": ("Robert Downey Jr.", "1965-04-04", "new_york_city", "usa"),
    "roy_scheider": ("Roy Scheider", "", "", "usa"),
    "harrison_ford": ("Harrison Ford", "1942-07-13", "chicago", "usa"),
    "kate_capshaw": ("Kate Capshaw", "", "", "usa"),
    "sam_neill": ("Sam Neill", "1947-09-14", "omagh", "new_zealand"),
    "laura_dern": ("Laura Dern", "1967-02-10", "los_angeles", "usa"),
    "liam_neeson": ("Liam Neeson", "1952-06-07", "ballymena", "uk ireland"),
    "ralph_fiennes": ("Ralph Fiennes", "1962-12-22", "ipswich", "uk"),
    "daniel_day_lewis": ("Daniel Day-Lewis", "1957-04-29", "london", "uk ireland"),
    "sally_field": ("Sally Field", "1946-11-06", "pasadena", "usa"),
    "tommy_lee_jones": ("Tommy Lee Jones", "1946-09-15", "san_saba", "usa"),
    "jodie_foster": ("Jodie Foster", "1962-11-19", "los_angeles", "usa"),
    "joe_pesci": ("Joe Pesci", "1943-02-09", "newark", "usa"),
    "ray_liotta": ("Ray Liotta", "1954-12-18", "newark", "usa"),
    "cate_blanchett": ("Cate Blanchett", "1969-05-14", "melbourne", "australia"),
    "mark_ruffalo": ("Mark Ruffalo", "1967-11-22", "kenosha", "usa"),
    "lily_gladstone": ("Lily Gladstone", "", "", "usa"),
    "harvey_keitel": ("Harvey Keitel", "1939-05-13", "new_york_city", "usa"),
    "tim_roth": ("Tim Roth", "1961-05-14", "london", "uk"),
    "john_travolta": ("John Travolta", "1954-02-18", "englewood", "usa"),
    "samuel_l_jackson": ("Samuel L. Jackson", "1948-12-21", "washington_dc", "usa"),
    "uma_thurman": ("Uma Thurman", "1970-04-29", "boston", "usa"),
    "pam_grier": ("Pam Grier", "", "", "usa"),
    "lucy_liu": ("Lucy Liu", "1968-12-02", "new_york_city", "usa"),
    "kurt_russell": ("Kurt Russell", "1951-03-17", "", "usa"),
    "christoph_waltz": ("Christoph Waltz", "1956-10-04", "vienna", "austria germany"),
    "jamie_foxx": ("Jamie Foxx", "1967-12-13", "terrell", "usa"),
    "james_stewart": ("James Stewart", "1908-05-20", "indiana_pa", "usa"),
    "grace_kelly": ("Grace Kelly", "1929-11-12", "philadelphia", "usa"),
    "cary_grant": ("Cary Grant", "1904-01-18", "bristol", "uk usa"),
    "janet_leigh": ("Janet Leigh", "1927-07-06", "", "usa"),
    "talia_shire": ("Talia Shire", "", "", "usa"),
    "sofia_coppola": ("Sofia Coppola", "1971-05-14", "new_york_city", "usa"),
    "martin_sheen": ("Martin Sheen", "1940-08-03", "dayton", "usa"),
    "laurence_fishburne": ("Laurence Fishburne", "1961-07-30", "", "usa"),
    "gene_hackman": ("Gene Hackman", "1930-01-30", "san_bernardino", "usa"),
    "arnold_schwarzenegger": ("Arnold Schwarzenegger", "1947-07-30", "thal", "austria usa"),
    "linda_hamilton": ("Linda Hamilton", "1956-09-26", "salisbury_md", "usa"),
    "sigourney_weaver": ("Sigourney Weaver", "1949-10-08", "new_york_city", "usa"),
    "jamie_lee_curtis": ("Jamie Lee Curtis", "1958-11-22", "", "usa"),
    "kate_winslet": ("Kate Winslet", "1975-10-05", "reading", "uk"),
    "sam_worthington": ("Sam Worthington", "", "", "australia"),
    "russell_crowe": ("Russell Crowe", "1964-04-07", "wellington", "new_zealand"),
    "joaquin_phoenix": ("Joaquin Phoenix", "1974-10-28", "san_juan", "usa"),
    "jake_gyllenhaal": ("Jake Gyllenhaal", "1980-12-19", "los_angeles", "usa"),
    "jeremy_renner": ("Jeremy Renner", "", "modesto", "usa"),
    "ryan_gosling": ("Ryan Gosling", "1980-11-12", "london_ontario", "canada"),
    "timothee_chalamet": ("Timothée Chalamet", "1995-12-27", "new_york_city", "usa france"),
    "zendaya": ("Zendaya", "1996-09-01", "oakland", "usa"),
    "javier_bardem": ("Javier Bardem", "1969-03-01", "las_palmas", "spain"),
    "kyle_maclachlan": ("Kyle MacLachlan", "", "", "usa"),
    "elijah_wood": ("Elijah Wood", "1981-01-28", "cedar_rapids", "usa"),
    "ian_mckellen": ("Ian McKellen", "1939-05-25", "burnley", "uk"),
    "viggo_mortensen": ("Viggo Mortensen", "1958-10-20", "new_york_city", "usa denmark"),
    "kevin_spacey": ("Kevin Spacey", "1959-07-26", "south_orange", "usa"),
    "edward_norton": ("Edward Norton", "1969-08-18", "boston", "usa"),
    "jesse_eisenberg": ("Jesse Eisenberg", "1983-10-05", "new_york_city", "usa"),
    "andrew_garfield": ("Andrew Garfield", "1983-08-20", "los_angeles", "usa uk"),
    "frances_mcdormand": ("Frances McDormand", "1957-06-23", "gibson_city", "usa"),
    "jeff_bridges": ("Jeff Bridges", "1949-12-04", "los_angeles", "usa"),
    "ivana_baquero": ("Ivana Baquero", "", "", "spain"),
    "sally_hawkins": ("Sally Hawkins", "", "", "uk"),
    "sandra_bullock": ("Sandra Bullock", "1964-07-26", "arlington", "usa"),
    "george_clooney": ("George Clooney", "1961-05-06", "lexington", "usa"),
    "yalitza_aparicio": ("Yalitza Aparicio", "", "", "mexico"),
    "michael_keaton": ("Michael Keaton", "1951-09-05", "", "usa"),
    "emma_stone": ("Emma Stone", "1988-11-06", "scottsdale", "usa"),
    "song_kang_ho": ("Song Kang-ho", "", "", "south_korea"),
    "mark_hamill": ("Mark Hamill", "1951-09-25", "oakland", "usa"),
    "keanu_reeves": ("Keanu Reeves", "1964-09-02", "beirut", "canada"),
    "anthony_hopkins": ("Anthony Hopkins", "1937-12-31", "port_talbot", "uk usa"),
    "denzel_washington": ("Denzel Washington", "1954-12-28", "mount_vernon", "usa"),
    "joseph_fiennes": ("Joseph Fiennes", "", "", "uk"),
    "michael_douglas": ("Michael Douglas", "1944-09-25", "", "usa"),
    "catherine_zeta_jones": ("Catherine Zeta-Jones", "1969-09-25", "swansea", "uk"),
    "ethan_hawke": ("Ethan Hawke", "1970-11-06", "austin", "usa"),
    "jean_dujardin": ("Jean Dujardin", "", "", "france"),
    "colin_firth": ("Colin Firth", "", "", "uk"),
    "suraj_sharma": ("Suraj Sharma", "", "", "india"),
    "chiwetel_ejiofor": ("Chiwetel Ejiofor", "", "", "uk"),
    "lupita_nyongo": ("Lupita Nyong'o", "1983-03-01", "mexico_city", "kenya mexico"),
    "eddie_redmayne": ("Eddie Redmayne", "1982-01-06", "london", "uk"),
    "mahershala_ali": ("Mahershala Ali", "", "", "usa"),
    "casey_affleck": ("Casey Affleck", "1975-08-12", "", "usa"),
    "rami_malek": ("Rami Malek", "1981-05-12", "los_angeles", "usa"),
    "will_smith": ("Will Smith", "1968-09-25", "philadelphia", "usa"),
    "troy_kotsur": ("Troy Kotsur", "", "", "usa"),
    "benedict_cumberbatch": ("Benedict Cumberbatch", "1976-07-19", "london", "uk"),
    "michelle_yeoh": ("Michelle Yeoh", "1962-08-06", "ipoh", "malaysia"),
    "ke_huy_quan": ("Ke Huy Quan", "", "", "usa"),
    "brendan_fraser": ("Brendan Fraser", "1968-12-03", "indianapolis", "usa canada"),
    # --- relatives and spouses who appear only through family ties ------------------------------------------
    "rita_wilson": ("Rita Wilson", "", "", "usa"),
    "jennifer_aniston": ("Jennifer Aniston", "", "", "usa"),
    "angelina_jolie": ("Angelina Jolie", "", "", "usa"),
    "gale_anne_hurd": ("Gale Anne Hurd", "", "", "usa"),
    "penelope_cruz": ("Penélope Cruz", "", "", "spain"),
    "john_krasinski": ("John Krasinski", "", "", "usa"),
    "pauletta_washington": ("Pauletta Washington", "", "", "usa"),
    "calista_flockhart": ("Calista Flockhart", "", "", "usa"),
    "jada_pinkett_smith": ("Jada Pinkett Smith", "", "", "usa"),
    "maria_shriver": ("Maria Shriver", "", "", "usa"),
    "eleanor_coppola": ("Eleanor Coppola", "", "", "usa"),
    "luciana_barroso": ("Luciana Barroso", "", "", ""),
    "tony_curtis": ("Tony Curtis", "", "", "usa"),
    "kirk_douglas": ("Kirk Douglas", "", "", "usa"),
    # --- composers, writers, producers ----------------------------------------------------------------------
    "hans_zimmer": ("Hans Zimmer", "1957-09-12", "frankfurt", "germany"),
    "james_newton_howard": ("James Newton Howard", "", "", "usa"),
    "john_williams": ("John Williams", "1932-02-08", "", "usa"),
    "ludwig_goransson": ("Ludwig Göransson", "", "", "sweden"),
    "david_julyan": ("David Julyan", "", "", "uk"),
    "howard_shore": ("Howard Shore", "", "", "canada"),
    "ennio_morricone": ("Ennio Morricone", "1928-11-10", "rome", "italy"),
    "james_horner": ("James Horner", "", "", "usa"),
    "thomas_newman": ("Thomas Newman", "", "", "usa"),
    "bernard_herrmann": ("Bernard Herrmann", "", "", "usa"),
    "nino_rota": ("Nino Rota", "", "", "italy"),
    "carmine_coppola": ("Carmine Coppola", "", "", "usa"),
    "jerry_goldsmith": ("Jerry Goldsmith", "", "", "usa"),
    "vangelis": ("Vangelis", "", "", "greece"),
    "justin_hurwitz": ("Justin Hurwitz", "", "", "usa"),
    "trent_reznor": ("Trent Reznor", "", "", "usa"),
    "atticus_ross": ("Atticus Ross", "", "", "uk"),
    "alexandre_desplat": ("Alexandre Desplat", "", "", "france"),
    "david_s_goyer": ("David S. Goyer", "", "", "usa"),
    "roger_avary": ("Roger Avary", "", "", "canada"),
    "mario_puzo": ("Mario Puzo", "", "", "usa"),
    "matt_charman": ("Matt Charman", "", "", "uk"),
    "aaron_sorkin": ("Aaron Sorkin", "", "", "usa"),
}

# key: (date of death, place of death or "")
DEATHS = {
    "marlon_brando": ("2004-07-01", "los_angeles"), "heath_ledger": ("2008-01-22", "new_york_city"),
    "robin_williams": ("2014-08-11", ""), "jonathan_demme": ("2017-04-26", "new_york_city"),
    "james_stewart": ("1997-07-02", ""), "cary_grant": ("1986-11-29", ""), "grace_kelly": ("1982-09-14", ""),
    "janet_leigh": ("2004-10-03", ""), "ray_liotta": ("2022-05-26", ""), "james_horner": ("2015-06-22", ""),
}

# (person, spouse, from year, to year or "")
MARRIAGES = [
    ("christopher_nolan", "emma_thomas", "1997", ""),
    ("tom_hanks", "rita_wilson", "1988", ""),
    ("brad_pitt", "jennifer_aniston", "2000", "2005"),
    ("brad_pitt", "angelina_jolie", "2014", "2019"),
    ("steven_spielberg", "kate_capshaw", "1991", ""),
    ("james_cameron", "gale_anne_hurd", "1985", "1989"),
    ("james_cameron", "kathryn_bigelow", "1989", "1991"),
    ("james_cameron", "linda_hamilton", "1997", "1999"),
    ("joel_coen", "frances_mcdormand", "1984", ""),
    ("sam_mendes", "kate_winslet", "2003", "2011"),
    ("ethan_hawke", "uma_thurman", "1998", "2005"),
    ("javier_bardem", "penelope_cruz", "2010", ""),
    ("emily_blunt", "john_krasinski", "2010", ""),
    ("denzel_washington", "pauletta_washington", "1983", ""),
    ("harrison_ford", "calista_flockhart", "2010", ""),
    ("will_smith", "jada_pinkett_smith", "1997", ""),
    ("michael_douglas", "catherine_zeta_jones", "2000", ""),
    ("arnold_schwarzenegger", "maria_shriver", "1986", "2021"),
    ("francis_ford_coppola", "eleanor_coppola", "1963", ""),
    ("matt_damon", "luciana_barroso", "2005", ""),
]

SIBLINGS = [
    ("christopher_nolan", "jonathan_nolan"), ("joel_coen", "ethan_coen"), ("jake_gyllenhaal", "maggie_gyllenhaal"),
    ("francis_ford_coppola", "talia_shire"), ("ben_affleck", "casey_affleck"), ("lana_wachowski", "lilly_wachowski"),
    ("ralph_fiennes", "joseph_fiennes"),
]

# (parent, child)
PARENTS = [
    ("francis_ford_coppola", "sofia_coppola"), ("eleanor_coppola", "sofia_coppola"),
    ("carmine_coppola", "francis_ford_coppola"), ("carmine_coppola", "talia_shire"),
    ("tony_curtis", "jamie_lee_curtis"), ("janet_leigh", "jamie_lee_curtis"), ("kirk_douglas", "michael_douglas"),
    ("denzel_washington", "john_david_washington"), ("pauletta_washington", "john_david_washington"),
]

# ============================================================================================================
# Films
# ============================================================================================================

GENRES = {
    "action": "Action Film", "adventure": "Adventure Film", "biographical": "Biographical film",
    "comedy": "Comedy", "crime": "Crime Fiction", "drama": "Drama", "fantasy": "Fantasy", "history": "Historical drama",
    "horror": "Horror", "musical": "Musical", "mystery": "Mystery", "romance": "Romance Film",
    "scifi": "Science Fiction", "thriller": "Thriller", "war": "War film", "western": "Western",
    "superhero": "Superhero movie", "sports": "Sports",
}

# (key, name, release year, directors, genres, cast as "actor=Character; ...")
FILMS = [
    # --- Christopher Nolan (every feature film he directed) -------------------------------------------------
    ("following", "Following", 1998, "christopher_nolan", "crime thriller", ""),
    ("memento", "Memento", 2000, "christopher_nolan", "mystery thriller", "guy_pearce=Leonard Shelby"),
    ("insomnia_2002", "Insomnia", 2002, "christopher_nolan", "thriller crime",
     "al_pacino=Will Dormer; robin_williams=Walter Finch"),
    ("batman_begins", "Batman Begins", 2005, "christopher_nolan", "action superhero",
     "christian_bale=Bruce Wayne; michael_caine=Alfred Pennyworth"),
    ("the_prestige", "The Prestige", 2006, "christopher_nolan", "mystery thriller",
     "hugh_jackman=Robert Angier; christian_bale=Alfred Borden"),
    ("the_dark_knight", "The Dark Knight", 2008, "christopher_nolan", "action crime",
     "christian_bale=Bruce Wayne; heath_ledger=Joker; maggie_gyllenhaal=Rachel Dawes; "
     "gary_oldman=James Gordon; michael_caine=Alfred Pennyworth"),
    ("inception", "Inception", 2010, "christopher_nolan", "scifi action",
     "leonardo_dicaprio=Dom Cobb; joseph_gordon_levitt=Arthur; elliot_page=Ariadne; tom_hardy=Eames; "
     "michael_caine=Miles; cillian_murphy=Robert Fischer"),
    ("the_dark_knight_rises", "The Dark Knight Rises", 2012, "christopher_nolan", "action superhero",
     "christian_bale=Bruce Wayne; tom_hardy=Bane; michael_caine=Alfred Pennyworth"),
    ("interstellar", "Interstellar", 2014, "christopher_nolan", "scifi drama",
     "matthew_mcconaughey=Cooper; anne_hathaway=Amelia Brand; jessica_chastain=Murph; "
     "michael_caine=Professor Brand"),
    ("dunkirk", "Dunkirk", 2017, "christopher_nolan", "war drama", "tom_hardy=Farrier"),
    ("tenet", "Tenet", 2020, "christopher_nolan", "scifi action",
     "john_david_washington=The Protagonist; robert_pattinson=Neil; elizabeth_debicki=Kat"),
    ("oppenheimer", "Oppenheimer", 2023, "christopher_nolan", "biographical drama",
     "cillian_murphy=J. Robert Oppenheimer; robert_downey_jr=Lewis Strauss"),
    # --- Steven Spielberg -----------------------------------------------------------------------------------
    ("jaws", "Jaws", 1975, "steven_spielberg", "thriller adventure", "roy_scheider=Martin Brody"),
    ("raiders_of_the_lost_ark", "Raiders of the Lost Ark", 1981, "steven_spielberg", "adventure action",
     "harrison_ford=Indiana Jones"),
    ("jurassic_park", "Jurassic Park", 1993, "steven_spielberg", "scifi adventure",
     "sam_neill=Alan Grant; laura_dern=Ellie Sattler"),
    ("schindlers_list", "Schindler's List", 1993, "steven_spielberg", "biographical drama",
     "liam_neeson=Oskar Schindler"),
    ("saving_private_ryan", "Saving Private Ryan", 1998, "steven_spielberg", "war drama",
     "tom_hanks=Captain Miller; matt_damon=James Francis Ryan"),
    ("catch_me_if_you_can", "Catch Me If You Can", 2002, "steven_spielberg", "biographical crime",
     "leonardo_dicaprio=Frank Abagnale Jr.; tom_hanks=Carl Hanratty"),
    ("lincoln", "Lincoln", 2012, "steven_spielberg", "biographical history",
     "daniel_day_lewis=Abraham Lincoln; sally_field=Mary Todd Lincoln"),
    ("bridge_of_spies", "Bridge of Spies", 2015, "steven_spielberg", "drama thriller",
     "tom_hanks=James B. Donovan; mark_rylance=Rudolf Abel"),
    # --- Martin Scorsese ------------------------------------------------------------------------------------
    ("taxi_driver", "Taxi Driver", 1976, "martin_scorsese", "crime drama",
     "robert_de_niro=Travis Bickle; jodie_foster=Iris"),
    ("raging_bull", "Raging Bull", 1980, "martin_scorsese", "biographical drama",
     "robert_de_niro=Jake LaMotta; joe_pesci=Joey LaMotta"),
    ("goodfellas", "Goodfellas", 1990, "martin_scorsese", "crime biographical",
     "ray_liotta=Henry Hill; robert_de_niro=Jimmy Conway"),
    ("gangs_of_new_york", "Gangs of New York", 2002, "martin_scorsese", "history crime",
     "leonardo_dicaprio=Amsterdam Vallon; daniel_day_lewis=Bill Cutting"),
    ("the_aviator", "The Aviator", 2004, "martin_scorsese", "biographical drama",
     "leonardo_dicaprio=Howard Hughes; cate_blanchett=Katharine Hepburn"),
    ("the_departed", "The Departed", 2006, "martin_scorsese", "crime thriller",
     "leonardo_dicaprio=Billy Costigan; matt_damon=Colin Sullivan"),
    ("shutter_island", "Shutter Island", 2010, "martin_scorsese", "thriller mystery",
     "leonardo_dicaprio=Teddy Daniels; mark_ruffalo=Chuck Aule"),
    ("the_wolf_of_wall_street", "The Wolf of Wall Street", 2013, "martin_scorsese", "biographical comedy",
     "leonardo_dicaprio=Jordan Belfort"),
    ("killers_of_the_flower_moon", "Killers of the Flower Moon", 2023, "martin_scorsese", "crime western",
     "leonardo_dicaprio=Ernest Burkhart; lily_gladstone=Mollie Burkhart"),
    # --- Quentin Tarantino (every feature film he directed) -------------------------------------------------
    ("reservoir_dogs", "Reservoir Dogs", 1992, "quentin_tarantino", "crime thriller",
     "harvey_keitel=Mr. White; tim_roth=Mr. Orange"),
    ("pulp_fiction", "Pulp Fiction", 1994, "quentin_tarantino", "crime",
     "john_travolta=Vincent Vega; samuel_l_jackson=Jules Winnfield"),
    ("jackie_brown", "Jackie Brown", 1997, "quentin_tarantino", "crime thriller",
     "pam_grier=Jackie Brown; samuel_l_jackson=Ordell Robbie"),
    ("kill_bill_volume_1", "Kill Bill: Volume 1", 2003, "quentin_tarantino", "action thriller",
     "uma_thurman=The Bride; lucy_liu=O-Ren Ishii"),
    ("kill_bill_volume_2", "Kill Bill: Volume 2", 2004, "quentin_tarantino", "action thriller",
     "uma_thurman=The Bride"),
    ("death_proof", "Death Proof", 2007, "quentin_tarantino", "thriller horror",
     "kurt_russell=Stuntman Mike"),
    ("inglourious_basterds", "Inglourious Basterds", 2009, "quentin_tarantino", "war drama",
     "brad_pitt=Aldo Raine; christoph_waltz=Hans Landa"),
    ("django_unchained", "Django Unchained", 2012, "quentin_tarantino", "western",
     "jamie_foxx=Django; christoph_waltz=King Schultz"),
    ("the_hateful_eight", "The Hateful Eight", 2015, "quentin_tarantino", "western mystery",
     "samuel_l_jackson=Marquis Warren; kurt_russell=John Ruth"),
    ("once_upon_a_time_in_hollywood", "Once Upon a Time in Hollywood", 2019,
     "quentin_tarantino", "comedy drama", "leonardo_dicaprio=Rick Dalton; brad_pitt=Cliff Booth"),
    # --- Alfred Hitchcock -----------------------------------------------------------------------------------
    ("dial_m_for_murder", "Dial M for Murder", 1954, "alfred_hitchcock", "crime thriller",
     "grace_kelly=Margot Wendice"),
    ("rear_window", "Rear Window", 1954, "alfred_hitchcock", "mystery thriller",
     "james_stewart=L. B. Jefferies; grace_kelly=Lisa Fremont"),
    ("to_catch_a_thief", "To Catch a Thief", 1955, "alfred_hitchcock", "romance thriller",
     "cary_grant=John Robie; grace_kelly=Frances Stevens"),
    ("psycho", "Psycho", 1960, "alfred_hitchcock", "horror thriller", "janet_leigh=Marion Crane"),
    # --- Francis Ford Coppola -------------------------------------------------------------------------------
    ("the_godfather", "The Godfather", 1972, "francis_ford_coppola", "crime drama",
     "marlon_brando=Vito Corleone; al_pacino=Michael Corleone"),
    ("the_conversation", "The Conversation", 1974, "francis_ford_coppola", "thriller mystery",
     "gene_hackman=Harry Caul; harrison_ford=Martin Stett"),
    ("the_godfather_part_ii", "The Godfather Part II", 1974, "francis_ford_coppola", "crime drama",
     "al_pacino=Michael Corleone; robert_de_niro=Vito Corleone"),
    ("apocalypse_now", "Apocalypse Now", 1979, "francis_ford_coppola", "war drama",
     "martin_sheen=Benjamin L. Willard; marlon_brando=Walter E. Kurtz; harrison_ford=Colonel Lucas"),
    # --- James Cameron --------------------------------------------------------------------------------------
    ("the_terminator", "The Terminator", 1984, "james_cameron", "scifi action",
     "arnold_schwarzenegger=The Terminator; linda_hamilton=Sarah Connor"),
    ("aliens", "Aliens", 1986, "james_cameron", "scifi action", "sigourney_weaver=Ellen Ripley"),
    ("titanic", "Titanic", 1997, "james_cameron", "romance drama",
     "leonardo_dicaprio=Jack Dawson; kate_winslet=Rose DeWitt Bukater"),
    ("avatar", "Avatar", 2009, "james_cameron", "scifi action", "sam_worthington=Jake Sully"),
    # --- Ridley Scott ---------------------------------------------------------------------------------------
    ("alien", "Alien", 1979, "ridley_scott", "scifi horror", "sigourney_weaver=Ellen Ripley"),
    ("blade_runner", "Blade Runner", 1982, "ridley_scott", "scifi thriller", "harrison_ford=Rick Deckard"),
    ("gladiator", "Gladiator", 2000, "ridley_scott", "action drama",
     "russell_crowe=Maximus; joaquin_phoenix=Commodus"),
    # --- Denis Villeneuve and Dune --------------------------------------------------------------------------
    ("blade_runner_2049", "Blade Runner 2049", 2017, "denis_villeneuve", "scifi thriller",
     "ryan_gosling=K; harrison_ford=Rick Deckard"),
    ("dune_2021", "Dune", 2021, "denis_villeneuve", "scifi adventure", "timothee_chalamet=Paul Atreides"),
    ("dune_part_two", "Dune: Part Two", 2024, "denis_villeneuve", "scifi adventure",
     "timothee_chalamet=Paul Atreides; zendaya=Chani"),
    ("dune_1984", "Dune", 1984, "david_lynch", "scifi adventure", "kyle_maclachlan=Paul Atreides"),
    # --- Peter Jackson --------------------------------------------------------------------------------------
    ("the_fellowship_of_the_ring", "The Lord of the Rings: The Fellowship of the Ring", 2001,
     "peter_jackson", "fantasy adventure", "elijah_wood=Frodo Baggins; ian_mckellen=Gandalf"),
    ("the_two_towers", "The Lord of the Rings: The Two Towers", 2002, "peter_jackson", "fantasy adventure",
     "elijah_wood=Frodo Baggins; ian_mckellen=Gandalf"),
    ("the_return_of_the_king", "The Lord of the Rings: The Return of the King", 2003,
     "peter_jackson", "fantasy adventure", "elijah_wood=Frodo Baggins; ian_mckellen=Gandalf"),
    # --- Clint Eastwood -------------------------------------------------------------------------------------
    ("unforgiven", "Unforgiven", 1992, "clint_eastwood", "western",
     "clint_eastwood=William Munny; gene_hackman=Little Bill Daggett"),
    ("million_dollar_baby", "Million Dollar Baby", 2004, "clint_eastwood", "drama sports",
     "clint_eastwood=Frankie Dunn; hilary_swank=Maggie Fitzgerald"),
    # --- David Fincher --------------------------------------------------------------------------------------
    ("se7en", "Se7en", 1995, "david_fincher", "crime thriller",
     "brad_pitt=David Mills; morgan_freeman=William Somerset"),
    ("fight_club", "Fight Club", 1999, "david_fincher", "drama",
     "edward_norton=The Narrator; brad_pitt=Tyler Durden"),
    ("the_social_network", "The Social Network", 2010, "david_fincher", "biographical drama",
     "jesse_eisenberg=Mark Zuckerberg; andrew_garfield=Eduardo Saverin"),
    # --- the Coen brothers (Fargo and The Big Lebowski were credited to Joel Coen alone) --------------------
    ("fargo", "Fargo", 1996, "joel_coen", "crime drama", "frances_mcdormand=Marge Gunderson"),
    ("the_big_lebowski", "The Big Lebowski", 1998, "joel_coen", "comedy crime", "jeff_bridges=The Dude"),
    ("no_country_for_old_men", "No Country for Old Men", 2007, "joel_coen ethan_coen", "crime thriller",
     "tommy_lee_jones=Ed Tom Bell; javier_bardem=Anton Chigurh"),
    ("true_grit", "True Grit", 2010, "joel_coen ethan_coen", "western", "jeff_bridges=Rooster Cogburn"),
    # --- Mexican directors ----------------------------------------------------------------------------------
    ("pans_labyrinth", "Pan's Labyrinth", 2006, "guillermo_del_toro", "fantasy drama",
     "ivana_baquero=Ofelia"),
    ("the_shape_of_water", "The Shape of Water", 2017, "guillermo_del_toro", "fantasy romance",
     "sally_hawkins=Elisa Esposito"),
    ("gravity", "Gravity", 2013, "alfonso_cuaron", "scifi thriller",
     "sandra_bullock=Ryan Stone; george_clooney=Matt Kowalski"),
    ("roma", "Roma", 2018, "alfonso_cuaron", "drama", "yalitza_aparicio=Cleo"),
    ("birdman", "Birdman", 2014, "alejandro_gonzalez_inarritu", "comedy drama",
     "michael_keaton=Riggan Thomson; edward_norton=Mike Shiner"),
    ("the_revenant", "The Revenant", 2015, "alejandro_gonzalez_inarritu", "adventure drama",
     "leonardo_dicaprio=Hugh Glass; tom_hardy=John Fitzgerald"),
    # --- Bong Joon-ho ---------------------------------------------------------------------------------------
    ("parasite", "Parasite", 2019, "bong_joon_ho", "thriller drama", "song_kang_ho=Kim Ki-taek"),
    # --- Star Wars and The Matrix ---------------------------------------------------------------------------
    ("star_wars", "Star Wars", 1977, "george_lucas", "scifi adventure",
     "mark_hamill=Luke Skywalker; harrison_ford=Han Solo"),
    ("the_matrix", "The Matrix", 1999, "lana_wachowski lilly_wachowski", "scifi action",
     "keanu_reeves=Neo; laurence_fishburne=Morpheus"),
    # --- Sam Mendes -----------------------------------------------------------------------------------------
    ("american_beauty", "American Beauty", 1999, "sam_mendes", "drama", "kevin_spacey=Lester Burnham"),
    ("revolutionary_road", "Revolutionary Road", 2008, "sam_mendes", "drama romance",
     "leonardo_dicaprio=Frank Wheeler; kate_winslet=April Wheeler"),
    # --- films that appear mainly through the Academy Awards ------------------------------------------------
    ("my_left_foot", "My Left Foot", 1989, "jim_sheridan", "biographical", "daniel_day_lewis=Christy Brown"),
    ("the_silence_of_the_lambs", "The Silence of the Lambs", 1991, "jonathan_demme", "thriller",
     "jodie_foster=Clarice Starling; anthony_hopkins=Hannibal Lecter"),
    ("there_will_be_blood", "There Will Be Blood", 2007, "paul_thomas_anderson", "drama",
     "daniel_day_lewis=Daniel Plainview"),
    ("the_hurt_locker", "The Hurt Locker", 2008, "kathryn_bigelow", "war", "jeremy_renner=William James"),
    ("crazy_heart", "Crazy Heart", 2009, "scott_cooper", "drama", "jeff_bridges=Bad Blake"),
    ("the_kings_speech", "The King's Speech", 2010, "tom_hooper", "biographical", "colin_firth=George VI"),
    ("the_artist", "The Artist", 2011, "michel_hazanavicius", "comedy", "jean_dujardin=George Valentin"),
    ("argo", "Argo", 2012, "ben_affleck", "thriller", "ben_affleck=Tony Mendez"),
    ("life_of_pi", "Life of Pi", 2012, "ang_lee", "adventure", "suraj_sharma=Pi Patel"),
    ("12_years_a_slave", "12 Years a Slave", 2013, "steve_mcqueen_director", "biographical",
     "chiwetel_ejiofor=Solomon Northup; lupita_nyongo=Patsey"),
    ("dallas_buyers_club", "Dallas Buyers Club", 2013, "jean_marc_vallee", "biographical",
     "matthew_mcconaughey=Ron Woodroof"),
    ("the_theory_of_everything", "The Theory of Everything", 2014, "james_marsh", "biographical",
     "eddie_redmayne=Stephen Hawking"),
    ("spotlight", "Spotlight", 2015, "tom_mccarthy", "drama", "mark_ruffalo=Mike Rezendes"),
    ("moonlight", "Moonlight", 2016, "barry_jenkins", "drama", "mahershala_ali=Juan"),
    ("manchester_by_the_sea", "Manchester by the Sea", 2016, "kenneth_lonergan", "drama",
     "casey_affleck=Lee Chandler"),
    ("la_la_land", "La La Land", 2016, "damien_chazelle", "musical",
     "ryan_gosling=Sebastian Wilder; emma_stone=Mia Dolan"),
    ("darkest_hour", "Darkest Hour", 2017, "joe_wright", "biographical", "gary_oldman=Winston Churchill"),
    ("green_book", "Green Book", 2018, "peter_farrelly", "biographical",
     "viggo_mortensen=Tony Lip; mahershala_ali=Don Shirley"),
    ("bohemian_rhapsody", "Bohemian Rhapsody", 2018, "bryan_singer", "biographical",
     "rami_malek=Freddie Mercury"),
    ("joker_2019", "Joker", 2019, "todd_phillips", "crime", "joaquin_phoenix=Arthur Fleck"),
    ("nomadland", "Nomadland", 2020, "chloe_zhao", "drama", "frances_mcdormand=Fern"),
    ("the_father", "The Father", 2020, "florian_zeller", "drama", "anthony_hopkins=Anthony"),
    ("coda", "CODA", 2021, "sian_heder", "drama", "troy_kotsur=Frank Rossi"),
    ("the_power_of_the_dog", "The Power of the Dog", 2021, "jane_campion", "western",
     "benedict_cumberbatch=Phil Burbank"),
    ("king_richard", "King Richard", 2021, "reinaldo_marcus_green", "biographical",
     "will_smith=Richard Williams"),
    ("everything_everywhere_all_at_once", "Everything Everywhere All at Once", 2022,
     "daniel_kwan daniel_scheinert", "scifi",
     "michelle_yeoh=Evelyn Quan Wang; ke_huy_quan=Waymond Wang; jamie_lee_curtis=Deirdre Beaubeirdre"),
    ("the_whale", "The Whale", 2022, "darren_aronofsky", "drama", "brendan_fraser=Charlie"),
]

# Writers, producers and composers for the films where we are sure of them (film key: (writers, producers, music)).
CREW = {
    "following": ("christopher_nolan", "christopher_nolan emma_thomas", "david_julyan"),
    "memento": ("christopher_nolan", "", "david_julyan"),
    "insomnia_2002": ("", "", "david_julyan"),
    "batman_begins": ("christopher_nolan david_s_goyer", "emma_thomas",
                      "hans_zimmer james_newton_howard"),
    "the_prestige": ("christopher_nolan jonathan_nolan", "christopher_nolan emma_thomas", "david_julyan"),
    "the_dark_knight": ("christopher_nolan jonathan_nolan", "christopher_nolan emma_thomas",
                        "hans_zimmer james_newton_howard"),
    "inception": ("christopher_nolan", "christopher_nolan emma_thomas", "hans_zimmer"),
    "the_dark_knight_rises": ("christopher_nolan jonathan_nolan", "christopher_nolan emma_thomas",
                              "hans_zimmer"),
    "interstellar": ("christopher_nolan jonathan_nolan", "christopher_nolan emma_thomas", "hans_zimmer"),
    "dunkirk": ("christopher_nolan", "christopher_nolan emma_thomas", "hans_zimmer"),
    "tenet": ("christopher_nolan", "christopher_nolan emma_thomas", "ludwig_goransson"),
    "oppenheimer": ("christopher_nolan", "christopher_nolan emma_thomas", "ludwig_goransson"),
    "jaws": ("", "", "john_williams"),
    "raiders_of_the_lost_ark": ("", "", "john_williams"),
    "jurassic_park": ("", "", "john_williams"),
    "schindlers_list": ("", "", "john_williams"),
    "saving_private_ryan": ("", "", "john_williams"),
    "catch_me_if_you_can": ("", "", "john_williams"),
    "lincoln": ("", "steven_spielberg", "john_williams"),
    "bridge_of_spies": ("matt_charman ethan_coen joel_coen", "", "thomas_newman"),
    "taxi_driver": ("", "", "bernard_herrmann"),
    "reservoir_dogs": ("quentin_tarantino", "", ""),
    "pulp_fiction": ("quentin_tarantino roger_avary", "", ""),
    "jackie_brown": ("quentin_tarantino", "", ""),
    "kill_bill_volume_1": ("quentin_tarantino", "", ""),
    "kill_bill_volume_2": ("quentin_tarantino", "", ""),
    "death_proof": ("quentin_tarantino", "", ""),
    "inglourious_basterds": ("quentin_tarantino", "", ""),
    "django_unchained": ("quentin_tarantino", "", ""),
    "the_hateful_eight": ("quentin_tarantino", "", "ennio_morricone"),
    "once_upon_a_time_in_hollywood": ("quentin_tarantino", "", ""),
    "the_godfather": ("mario_puzo francis_ford_coppola", "", "nino_rota"),
    "the_godfather_part_ii": ("mario_puzo francis_ford_coppola", "", "nino_rota carmine_coppola"),
    "the_terminator": ("james_cameron gale_anne_hurd", "", ""),
    "titanic": ("james_cameron", "james_cameron", "james_horner"),
    "avatar": ("james_cameron", "james_cameron", "james_horner"),
    "alien": ("", "", "jerry_goldsmith"),
    "blade_runner": ("", "", "vangelis"),
    "gladiator": ("", "", "hans_zimmer"),
    "dune_2021": ("", "", "hans_zimmer"),
    "dune_part_two": ("", "", "hans_zimmer"),
    "the_fellowship_of_the_ring": ("peter_jackson", "", "howard_shore"),
    "the_two_towers": ("peter_jackson", "", "howard_shore"),
    "the_return_of_the_king": ("peter_jackson", "", "howard_shore"),
    "the_social_network": ("aaron_sorkin", "", "trent_reznor atticus_ross"),
    "fargo": ("joel_coen ethan_coen", "", ""),
    "the_big_lebowski": ("joel_coen ethan_coen", "", ""),
    "no_country_for_old_men": ("joel_coen ethan_coen", "", ""),
    "true_grit": ("joel_coen ethan_coen", "", ""),
    "the_shape_of_water": ("", "", "alexandre_desplat"),
    "star_wars": ("george_lucas", "", "john_williams"),
    "the_matrix": ("lana_wachowski lilly_wachowski", "", ""),
    "american_beauty": ("", "", "thomas_newman"),
    "revolutionary_road": ("", "", "thomas_newman"),
    "la_la_land": ("damien_chazelle", "", "justin_hurwitz"),
}

# (prequel, sequel)
SEQUELS = [
    ("batman_begins", "the_dark_knight"), ("the_dark_knight", "the_dark_knight_rises"),
    ("the_godfather", "the_godfather_part_ii"), ("alien", "aliens"),
    ("blade_runner", "blade_runner_2049"), ("dune_2021", "dune_part_two"),
    ("the_fellowship_of_the_ring", "the_two_towers"), ("the_two_towers", "the_return_of_the_king"),
    ("kill_bill_volume_1", "kill_bill_volume_2"),
]

ALIASES = {
    "se7en": ["Seven"], "the_godfather_part_ii": ["Godfather II"],
    "star_wars": ["Star Wars: Episode IV – A New Hope"],
    "the_dark_knight": ["Dark Knight"], "steven_spielberg": ["Spielberg"],
}

# ============================================================================================================
# Awards
# ============================================================================================================

AWARD_CATEGORIES = {
    "best_picture": ("Academy Award for Best Picture", "academy_awards"),
    "best_director": ("Academy Award for Best Director", "academy_awards"),
    "best_actor": ("Academy Award for Best Actor", "academy_awards"),
    "best_supporting_actor": ("Academy Award for Best Supporting Actor", "academy_awards"),
    "palme_dor": ("Palme d'Or", "cannes_film_festival"),
}
AWARDS = {"academy_awards": "Academy Awards", "cannes_film_festival": "Cannes Film Festival"}

# Academy Awards by ceremony year (the year the award was presented, for films of the previous year):
# category: [(year, film, winners)]. Best Picture honours a film, not a person. Best Picture, Director and Actor are
# complete for the 82nd to 96th ceremonies (2010-2024); earlier years and Best Supporting Actor are a selection.
OSCARS = {
    "best_picture": [
        (1973, "the_godfather", ""), (1975, "the_godfather_part_ii", ""), (1992, "the_silence_of_the_lambs", ""),
        (1993, "unforgiven", ""), (1994, "schindlers_list", ""), (1998, "titanic", ""),
        (2000, "american_beauty", ""), (2001, "gladiator", ""), (2004, "the_return_of_the_king", ""),
        (2005, "million_dollar_baby", ""), (2007, "the_departed", ""), (2008, "no_country_for_old_men", ""),
        (2010, "the_hurt_locker", ""), (2011, "the_kings_speech", ""), (2012, "the_artist", ""), (2013, "argo", ""),
        (2014, "12_years_a_slave", ""), (2015, "birdman", ""), (2016, "spotlight", ""), (2017, "moonlight", ""),
        (2018, "the_shape_of_water", ""), (2019, "green_book", ""), (2020, "parasite", ""),
        (2021, "nomadland", ""), (2022, "coda", ""), (2023, "everything_everywhere_all_at_once", ""),
        (2024, "oppenheimer", ""),
    ],
    "best_director": [
        (1975, "the_godfather_part_ii", "francis_ford_coppola"), (1992, "the_silence_of_the_lambs", "jonathan_demme"),
        (1993, "unforgiven", "clint_eastwood"), (1994, "schindlers_list", "steven_spielberg"),
        (1998, "titanic", "james_cameron"), (1999, "saving_private_ryan", "steven_spielberg"),
        (2000, "american_beauty", "sam_mendes"), (2004, "the_return_of_the_king", "peter_jackson"),
        (2005, "million_dollar_baby", "clint_eastwood"), (2007, "the_departed", "martin_scorsese"),
        (2008, "no_country_for_old_men", "joel_coen ethan_coen"), (2010, "the_hurt_locker", "kathryn_bigelow"),
        (2011, "the_kings_speech", "tom_hooper"), (2012, "the_artist", "michel_hazanavicius"),
        (2013, "life_of_pi", "ang_lee"), (2014, "gravity", "alfonso_cuaron"),
        (2015, "birdman", "alejandro_gonzalez_inarritu"), (2016, "the_revenant", "alejandro_gonzalez_inarritu"),
        (2017, "la_la_land", "damien_chazelle"), (2018, "the_shape_of_water", "guillermo_del_toro"),
        (2019, "roma", "alfonso_cuaron"), (2020, "parasite", "bong_joon_ho"), (2021, "nomadland", "chloe_zhao"),
        (2022, "the_power_of_the_dog", "jane_campion"),
        (2023, "everything_everywhere_all_at_once", "daniel_kwan daniel_scheinert"),
        (2024, "oppenheimer", "christopher_nolan"),
    ],
    "best_actor": [
        (1973, "the_godfather", "marlon_brando"), (1981, "raging_bull", "robert_de_niro"),
        (1990, "my_left_foot", "daniel_day_lewis"), (1992, "the_silence_of_the_lambs", "anthony_hopkins"),
        (2000, "american_beauty", "kevin_spacey"), (2001, "gladiator", "russell_crowe"),
        (2008, "there_will_be_blood", "daniel_day_lewis"), (2010, "crazy_heart", "jeff_bridges"),
        (2011, "the_kings_speech", "colin_firth"), (2012, "the_artist", "jean_dujardin"),
        (2013, "lincoln", "daniel_day_lewis"), (2014, "dallas_buyers_club", "matthew_mcconaughey"),
        (2015, "the_theory_of_everything", "eddie_redmayne"), (2016, "the_revenant", "leonardo_dicaprio"),
        (2017, "manchester_by_the_sea", "casey_affleck"), (2018, "darkest_hour", "gary_oldman"),
        (2019, "bohemian_rhapsody", "rami_malek"), (2020, "joker_2019", "joaquin_phoenix"),
        (2021, "the_father", "anthony_hopkins"), (2022, "king_richard", "will_smith"),
        (2023, "the_whale", "brendan_fraser"), (2024, "oppenheimer", "cillian_murphy"),
    ],
    "best_supporting_actor": [
        (2008, "no_country_for_old_men", "javier_bardem"), (2009, "the_dark_knight", "heath_ledger"),
        (2010, "inglourious_basterds", "christoph_waltz"), (2013, "django_unchained", "christoph_waltz"),
        (2016, "bridge_of_spies", "mark_rylance"), (2017, "moonlight", "mahershala_ali"),
        (2019, "green_book", "mahershala_ali"), (2020, "once_upon_a_time_in_hollywood", "brad_pitt"),
        (2022, "coda", "troy_kotsur"), (2023, "everything_everywhere_all_at_once", "ke_huy_quan"),
        (2024, "oppenheimer", "robert_downey_jr"),
    ],
}

# Palme d'Or (Cannes): (year, film, winners = the film's director).
PALME_DOR = [
    (1976, "taxi_driver", "martin_scorsese"), (1979, "apocalypse_now", "francis_ford_coppola"),
    (1994, "pulp_fiction", "quentin_tarantino"), (2019, "parasite", "bong_joon_ho"),
]



# ============================================================================================================
# Building the triples
# ============================================================================================================

def slug(text: str) -> str:
    """``"Dom Cobb"`` -> ``dom_cobb``; accents dropped, anything else not [0-9a-z] becomes one underscore."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"[^0-9a-z]+", "_", ascii_text).strip("_")


def year_literal(year: int | str) -> str:
    return f'"{year}"^^<{XSD}gYear>'


def date_literal(date: str) -> str:
    return f'"{date}"^^<{XSD}date>'


def plain_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ent(key: str) -> str:
    """The synthetic Freebase-style id of a keyed entity."""
    return PREFIX + key


def char(name: str) -> str:
    """The id of a film character, by its name (one character shared across films, as in Freebase)."""
    return PREFIX + "char_" + slug(name)


def split(text: str) -> list[str]:
    return text.split()


class Builder:
    """Collects triples (deduplicated, in insertion order) and names, and checks ids as it goes."""

    def __init__(self) -> None:
        self.triples: list[tuple[str, str, str]] = []
        self._seen: set[tuple[str, str, str]] = set()
        self.names: dict[str, str] = {}
        self.cvts: set[str] = set()

    def add(self, head: str, relation: str, tail: str) -> None:
        if not ID_RE.match(head):
            raise ValueError(f"bad head id {head!r}")
        if not tail.startswith('"') and not ID_RE.match(tail):
            raise ValueError(f"bad tail id {tail!r}")
        triple = (head, relation, tail)
        if triple not in self._seen:
            self._seen.add(triple)
            self.triples.append(triple)

    def both(self, head: str, relation: str, tail: str, reverse: str) -> None:
        """A relation Freebase stores in both directions (``reverse`` is its reverse property)."""
        self.add(head, relation, tail)
        self.add(tail, reverse, head)

    def name(self, entity: str, name: str) -> None:
        if not ID_RE.match(entity):
            raise ValueError(f"bad id {entity!r}")
        old = self.names.get(entity)
        if old is not None and old != name:
            raise ValueError(f"id clash: {entity} is both {old!r} and {name!r}")
        self.names[entity] = name

    def cvt(self, key: str) -> str:
        """A new nameless mediator node."""
        node = PREFIX + "cvt_" + key
        if node in self.cvts:
            raise ValueError(f"duplicate CVT {node}")
        self.cvts.add(node)
        return node

    def type_node(self, type_name: str) -> str:
        """A Freebase type as an entity (``film.film`` -> ``m.0demo_type_film_film`` named "Film")."""
        node = PREFIX + "type_" + type_name.replace(".", "_")
        self.name(node, TYPE_NAMES[type_name])
        return node


# Freebase types used by the noise edges (type.object.type, common.topic.notable_types), which the Freebase schema
# hides from methods; a few of them are enough to exercise that filtering.
TYPE_NAMES = {
    "film.film": "Film", "location.country": "Country", "award.award_category": "Award category",
    "people.marriage": "Marriage",
}


def build() -> Builder:
    b = Builder()
    contains = "location.location.contains"
    containedby = "location.location.containedby"

    # -- places ----------------------------------------------------------------------------------------------
    for key, name in CONTINENTS.items():
        b.name(ent(key), name)
    for key, name in CURRENCIES.items():
        b.name(ent(key), name)
    for key, name in LANGUAGES.items():
        b.name(ent("lang_" + key), name)
    for key, (name, continent, capitals, currency, languages) in COUNTRIES.items():
        country = ent(key)
        b.name(country, name)
        b.add(country, "type.object.type", b.type_node("location.country"))
        b.both(country, containedby, ent(continent), contains)
        for capital in capitals:
            b.add(country, "location.country.capital", ent(capital))
        b.both(country, "location.country.currency_used", ent(currency), "finance.currency.countries_used")
        for language in languages:
            b.add(country, "location.country.official_language", ent("lang_" + language))
    for key, (name, country) in DIVISIONS.items():
        b.name(ent(key), name)
        b.both(ent(key), containedby, ent(country), contains)
    for key, (name, country) in TERRITORIES.items():
        b.name(ent(key), name)
        b.both(ent(key), containedby, ent(country), contains)
    for key, (name, parent) in CITIES.items():
        b.name(ent(key), name)
        if parent not in COUNTRIES and parent not in DIVISIONS and parent not in TERRITORIES:
            raise ValueError(f"city {key}: unknown parent {parent}")
        b.both(ent(key), containedby, ent(parent), contains)

    # -- people ----------------------------------------------------------------------------------------------
    for key, (name, born, place, nationalities) in PEOPLE.items():
        person = ent(key)
        b.name(person, name)
        if born:
            b.add(person, "people.person.date_of_birth", date_literal(born))
        if place:
            if place not in CITIES:
                raise ValueError(f"{key}: unknown birthplace {place}")
            b.both(person, "people.person.place_of_birth", ent(place), "location.location.people_born_here")
        for country in split(nationalities):
            if country not in COUNTRIES:
                raise ValueError(f"{key}: unknown nationality {country}")
            b.add(person, "people.person.nationality", ent(country))
    for key, (died, place) in DEATHS.items():
        if key not in PEOPLE:
            raise ValueError(f"death of unknown person {key}")
        b.add(ent(key), "people.deceased_person.date_of_death", date_literal(died))
        if place:
            b.add(ent(key), "people.deceased_person.place_of_death", ent(place))
    for a, c, start, end in MARRIAGES:
        node = b.cvt(f"marriage_{a}_{c}")
        b.add(node, "type.object.type", b.type_node("people.marriage"))
        for person in (a, c):
            if person not in PEOPLE:
                raise ValueError(f"marriage of unknown person {person}")
            b.both(ent(person), "people.person.spouse_s", node, "people.marriage.spouse")
        b.add(node, "people.marriage.from", year_literal(start))
        if end:
            b.add(node, "people.marriage.to", year_literal(end))
    for a, c in SIBLINGS:
        node = b.cvt(f"sibling_{a}_{c}")
        for person in (a, c):
            b.both(ent(person), "people.person.sibling_s", node, "people.sibling_relationship.sibling")
    for parent, child in PARENTS:
        b.both(ent(child), "people.person.parents", ent(parent), "people.person.children")

    # -- films -----------------------------------------------------------------------------------------------
    for key, name in GENRES.items():
        b.name(ent("genre_" + key), name)
    film_keys = set()
    for key, name, year, film_directors, genres, cast in FILMS:
        if key in film_keys:
            raise ValueError(f"duplicate film {key}")
        film_keys.add(key)
        film = ent(key)
        b.name(film, name)
        b.add(film, "common.topic.notable_types", b.type_node("film.film"))
        b.add(film, "film.film.initial_release_date", year_literal(year))
        for director in split(film_directors):
            if director not in PEOPLE:
                raise ValueError(f"{key}: unknown director {director}")
            b.both(film, "film.film.directed_by", ent(director), "film.director.film")
        for genre in split(genres):
            if genre not in GENRES:
                raise ValueError(f"{key}: unknown genre {genre}")
            b.both(film, "film.film.genre", ent("genre_" + genre), "film.film_genre.films_in_this_genre")
        for i, item in enumerate(x.strip() for x in cast.split(";") if x.strip()):
            actor, character = (part.strip() for part in item.split("=", 1))
            if actor not in PEOPLE:
                raise ValueError(f"{key}: unknown actor {actor}")
            role = b.cvt(f"perf_{key}_{i + 1}")
            b.both(film, "film.film.starring", role, "film.performance.film")
            b.both(role, "film.performance.actor", ent(actor), "film.actor.film")
            b.name(char(character), character)
            b.both(role, "film.performance.character", char(character), "film.film_character.portrayed_in_films")
    for key, (writers, producers, music) in CREW.items():
        if key not in film_keys:
            raise ValueError(f"crew for unknown film {key}")
        for relation, reverse, people in (("film.film.written_by", "film.writer.film", writers),
                                          ("film.film.produced_by", "film.producer.film", producers),
                                          ("film.film.music", "film.music_contributor.film", music)):
            for person in split(people):
                if person not in PEOPLE:
                    raise ValueError(f"{key}: unknown crew member {person}")
                b.both(ent(key), relation, ent(person), reverse)
    for prequel, sequel in SEQUELS:
        b.both(ent(prequel), "film.film.sequel", ent(sequel), "film.film.prequel")
    for key, aliases in ALIASES.items():
        for alias in aliases:
            b.add(ent(key), "common.topic.alias", plain_literal(alias))

    # -- awards ----------------------------------------------------------------------------------------------
    for key, name in AWARDS.items():
        b.name(ent(key), name)
    for name, award in AWARD_CATEGORIES.values():
        category = ent(slug(name))
        b.name(category, name)
        b.add(category, "type.object.type", b.type_node("award.award_category"))
        b.both(category, "award.award_category.category_of", ent(award), "award.award.category")
    honours = [(category, year, film, winners) for category, rows in OSCARS.items()
               for year, film, winners in rows]
    honours += [("palme_dor", year, film, winners) for year, film, winners in PALME_DOR]
    for category, year, film, winners in honours:
        if film not in film_keys:
            raise ValueError(f"award {category} {year}: unknown film {film}")
        node = b.cvt(f"honor_{category}_{year}")
        category_id = ent(slug(AWARD_CATEGORIES[category][0]))
        b.both(node, "award.award_honor.award", category_id, "award.award_category.winners")
        b.add(node, "award.award_honor.year", year_literal(year))
        b.both(node, "award.award_honor.honored_for", ent(film), "award.award_winning_work.awards_won")
        for winner in split(winners):
            if winner not in PEOPLE:
                raise ValueError(f"award {category} {year}: unknown winner {winner}")
            b.both(node, "award.award_honor.award_winner", ent(winner), "award.award_winner.awards_won")
    return b


# ============================================================================================================
# Questions: gold chains and hand-written gold answers (the self-check proves they agree with the triples)
# ============================================================================================================

DOB = "people.person.date_of_birth"
BORN_IN = "people.person.place_of_birth"
IN = "location.location.containedby"
DIRECTED_BY = "film.film.directed_by"
DIRECTOR_OF = "film.director.film"
STARRING = "film.film.starring"
ACTOR = "film.performance.actor"
CHARACTER = "film.performance.character"
ACTS_IN = "film.actor.film"
PERF_FILM = "film.performance.film"
PORTRAYED = "film.film_character.portrayed_in_films"
RELEASED = "film.film.initial_release_date"
WON = "award.award_winner.awards_won"
HONOR_AWARD = "award.award_honor.award"
HONOR_YEAR = "award.award_honor.year"
HONOR_FOR = "award.award_honor.honored_for"
HONOR_WINNER = "award.award_honor.award_winner"
CATEGORY_WINNERS = "award.award_category.winners"
WORK_AWARDS = "award.award_winning_work.awards_won"

NOLAN_FILMS = ["following", "memento", "insomnia_2002", "batman_begins", "the_prestige", "the_dark_knight",
               "inception", "the_dark_knight_rises", "interstellar", "dunkirk", "tenet", "oppenheimer"]
TARANTINO_FILMS = ["reservoir_dogs", "pulp_fiction", "jackie_brown", "kill_bill_volume_1", "kill_bill_volume_2",
                   "death_proof", "inglourious_basterds", "django_unchained", "the_hateful_eight",
                   "once_upon_a_time_in_hollywood"]
BEST_PICTURE = "academy_award_for_best_picture"
BEST_DIRECTOR = "academy_award_for_best_director"
BEST_ACTOR = "academy_award_for_best_actor"

# Each question: (type, text, topic keys, chain, constraint or None, gold answers).
# Keys name entities (ent(key)); "char:Name" names a character; a value starting with '"' is a literal id as is.
# A constraint is (source position, chain, target).
QUESTIONS = [
    # --- one hop --------------------------------------------------------------------------------------------
    ("one-hop", "Who directed Inception?", ["inception"], DIRECTED_BY, None, ["christopher_nolan"]),
    ("one-hop", "Which films did Christopher Nolan direct?", ["christopher_nolan"], DIRECTOR_OF, None, NOLAN_FILMS),
    ("one-hop", "Which films did Quentin Tarantino direct?", ["quentin_tarantino"], DIRECTOR_OF, None,
     TARANTINO_FILMS),
    ("one-hop", "Where was Leonardo DiCaprio born?", ["leonardo_dicaprio"], BORN_IN, None, ["los_angeles"]),
    ("one-hop", "When was Steven Spielberg born?", ["steven_spielberg"], DOB, None, [date_literal("1946-12-18")]),
    ("one-hop", "What is the capital of France?", ["france"], "location.country.capital", None, ["paris"]),
    ("one-hop", "Which country has Canberra as its capital?", ["canberra"], "^location.country.capital", None,
     ["australia"]),
    ("one-hop", "In what year was The Godfather released?", ["the_godfather"], RELEASED, None,
     [year_literal(1972)]),
    ("one-hop", "What currency is used in Japan?", ["japan"], "location.country.currency_used", None,
     ["japanese_yen"]),
    ("one-hop", "Who composed the music for Interstellar?", ["interstellar"], "film.film.music", None,
     ["hans_zimmer"]),
    ("one-hop", "What is the sequel to The Dark Knight?", ["the_dark_knight"], "film.film.sequel", None,
     ["the_dark_knight_rises"]),
    ("one-hop", "Who wrote Pulp Fiction?", ["pulp_fiction"], "film.film.written_by", None,
     ["quentin_tarantino", "roger_avary"]),
    ("one-hop", "What is the nationality of Bong Joon-ho?", ["bong_joon_ho"], "people.person.nationality", None,
     ["south_korea"]),
    ("one-hop", "What are the official languages of Canada?", ["canada"], "location.country.official_language",
     None, ["lang_english", "lang_french"]),
    ("one-hop", "Who are the parents of Jamie Lee Curtis?", ["jamie_lee_curtis"], "people.person.parents", None,
     ["tony_curtis", "janet_leigh"]),
    ("one-hop", "When did Heath Ledger die?", ["heath_ledger"], "people.deceased_person.date_of_death", None,
     [date_literal("2008-01-22")]),
    ("one-hop", "Which US state is Knoxville in?", ["knoxville"], IN, None, ["tennessee"]),
    # --- multi-hop ------------------------------------------------------------------------------------------
    ("multi-hop", "Who starred in Inception?", ["inception"], f"{STARRING},{ACTOR}", None,
     ["leonardo_dicaprio", "joseph_gordon_levitt", "elliot_page", "tom_hardy", "michael_caine", "cillian_murphy"]),
    ("multi-hop", "Which actors have played Paul Atreides?", ["char:Paul Atreides"], f"{PORTRAYED},{ACTOR}", None,
     ["kyle_maclachlan", "timothee_chalamet"]),
    ("multi-hop", "Which actors have played Vito Corleone?", ["char:Vito Corleone"], f"{PORTRAYED},{ACTOR}", None,
     ["marlon_brando", "robert_de_niro"]),
    ("multi-hop", "Who played Ellen Ripley?", ["char:Ellen Ripley"], f"{PORTRAYED},{ACTOR}", None,
     ["sigourney_weaver"]),
    ("multi-hop", "In which city was the director of Parasite born?", ["parasite"], f"{DIRECTED_BY},{BORN_IN}",
     None, ["daegu"]),
    ("multi-hop", "What is the capital of the country where Bong Joon-ho was born?", ["bong_joon_ho"],
     f"{BORN_IN},{IN},location.country.capital", None, ["seoul"]),
    ("multi-hop", "In which country was Christopher Nolan born?", ["christopher_nolan"], f"{BORN_IN},{IN},{IN}",
     None, ["uk"]),
    ("multi-hop", "What currency is used in the country where Keanu Reeves was born?", ["keanu_reeves"],
     f"{BORN_IN},{IN},location.country.currency_used", None, ["lebanese_pound"]),
    ("multi-hop", "Who directed the sequel to Alien?", ["alien"], f"film.film.sequel,{DIRECTED_BY}", None,
     ["james_cameron"]),
    ("multi-hop", "Who composed the music for the sequel to Batman Begins?", ["batman_begins"],
     "film.film.sequel,film.film.music", None, ["hans_zimmer", "james_newton_howard"]),
    ("multi-hop", "Who composed the music for the films directed by Christopher Nolan?", ["christopher_nolan"],
     f"{DIRECTOR_OF},film.film.music", None,
     ["david_julyan", "hans_zimmer", "james_newton_howard", "ludwig_goransson"]),
    ("multi-hop", "Which films were directed by the director of Memento?", ["memento"],
     f"{DIRECTED_BY},^{DIRECTED_BY}", None, NOLAN_FILMS),
    ("multi-hop", "For which films did Daniel Day-Lewis win Academy Awards?", ["daniel_day_lewis"],
     f"{WON},{HONOR_FOR}", None, ["my_left_foot", "there_will_be_blood", "lincoln"]),
    ("multi-hop", "Which films did Jonathan Nolan's brother direct?", ["jonathan_nolan"],
     f"people.person.sibling_s,people.sibling_relationship.sibling,{DIRECTOR_OF}", None, NOLAN_FILMS),
    ("multi-hop", "Where was the actor who played Lester Burnham born?", ["char:Lester Burnham"],
     f"{PORTRAYED},{ACTOR},{BORN_IN}", None, ["south_orange"]),
    ("multi-hop", "Where was the actor who played Neo born?", ["char:Neo"], f"{PORTRAYED},{ACTOR},{BORN_IN}", None,
     ["beirut"]),
    ("multi-hop", "When were the directors of No Country for Old Men born?", ["no_country_for_old_men"],
     f"{DIRECTED_BY},{DOB}", None, [date_literal("1954-11-29"), date_literal("1957-09-21")]),
    ("multi-hop", "For which films did Christoph Waltz win Academy Awards?", ["christoph_waltz"],
     f"{WON},{HONOR_FOR}", None, ["inglourious_basterds", "django_unchained"]),
    ("multi-hop", "Which actor won an Academy Award for Moonlight?", ["moonlight"], f"{WORK_AWARDS},{HONOR_WINNER}",
     None, ["mahershala_ali"]),
    ("multi-hop", "Which genres are the films directed by Christopher Nolan?", ["christopher_nolan"],
     f"{DIRECTOR_OF},film.film.genre", None,
     ["genre_crime", "genre_thriller", "genre_mystery", "genre_action", "genre_superhero", "genre_scifi",
      "genre_drama", "genre_war", "genre_biographical"]),
    # --- constraints ----------------------------------------------------------------------------------------
    ("constraint", "In which films did Michael Caine play Alfred Pennyworth?", ["michael_caine"],
     f"{ACTS_IN},{PERF_FILM}", (1, CHARACTER, "char:Alfred Pennyworth"),
     ["batman_begins", "the_dark_knight", "the_dark_knight_rises"]),
    ("constraint", "Who played Cobb in Inception?", ["inception"], f"{STARRING},{ACTOR}",
     (1, CHARACTER, "char:Dom Cobb"), ["leonardo_dicaprio"]),
    ("constraint", "Who played Rachel Dawes in The Dark Knight?", ["the_dark_knight"], f"{STARRING},{ACTOR}",
     (1, CHARACTER, "char:Rachel Dawes"), ["maggie_gyllenhaal"]),
    ("constraint", "Who played Vito Corleone in The Godfather Part II?", ["the_godfather_part_ii"],
     f"{STARRING},{ACTOR}", (1, CHARACTER, "char:Vito Corleone"), ["robert_de_niro"]),
    ("constraint", "Which film directed by Christopher Nolan was released in 2010?", ["christopher_nolan"],
     DIRECTOR_OF, (1, RELEASED, year_literal(2010)), ["inception"]),
    ("constraint", "Which Steven Spielberg films were released in 1993?", ["steven_spielberg"], DIRECTOR_OF,
     (1, RELEASED, '"1993"'), ["jurassic_park", "schindlers_list"]),
    ("constraint", "Who won the Academy Award for Best Actor in 2016?", [BEST_ACTOR],
     f"{CATEGORY_WINNERS},{HONOR_WINNER}", (1, HONOR_YEAR, year_literal(2016)), ["leonardo_dicaprio"]),
    ("constraint", "Who won the Academy Award for Best Director in 2010?", [BEST_DIRECTOR],
     f"{CATEGORY_WINNERS},{HONOR_WINNER}", (1, HONOR_YEAR, year_literal(2010)), ["kathryn_bigelow"]),
    ("constraint", "Who directed the film that won the Academy Award for Best Picture in 1998?", [BEST_PICTURE],
     f"{CATEGORY_WINNERS},{HONOR_FOR},{DIRECTED_BY}", (1, HONOR_YEAR, year_literal(1998)), ["james_cameron"]),
    ("constraint", "Which film won the Academy Award for Best Picture in 2020?", [BEST_PICTURE],
     f"{CATEGORY_WINNERS},{HONOR_FOR}", (1, HONOR_YEAR, year_literal(2020)), ["parasite"]),
    ("constraint", "In what year was the film that won the Academy Award for Best Picture in 2004 released?",
     [BEST_PICTURE], f"{CATEGORY_WINNERS},{HONOR_FOR},{RELEASED}", (1, HONOR_YEAR, year_literal(2004)),
     [year_literal(2003)]),
    ("constraint", "Which Best Picture winner did Steven Spielberg direct?", ["steven_spielberg"], DIRECTOR_OF,
     (1, f"{WORK_AWARDS},{HONOR_AWARD}", BEST_PICTURE), ["schindlers_list"]),
    ("constraint", "Which films starring Leonardo DiCaprio were directed by Martin Scorsese?",
     ["leonardo_dicaprio"], f"{ACTS_IN},{PERF_FILM}", (2, DIRECTED_BY, "martin_scorsese"),
     ["gangs_of_new_york", "the_aviator", "the_departed", "shutter_island", "the_wolf_of_wall_street",
      "killers_of_the_flower_moon"]),
    ("constraint", "Which film co-written by Joel Coen was directed by Steven Spielberg?", ["joel_coen"],
     "film.writer.film", (1, DIRECTED_BY, "steven_spielberg"), ["bridge_of_spies"]),
    ("constraint", "Which Alfred Hitchcock films starred Grace Kelly?", ["alfred_hitchcock"], DIRECTOR_OF,
     (1, f"{STARRING},{ACTOR}", "grace_kelly"), ["dial_m_for_murder", "rear_window", "to_catch_a_thief"]),
    ("constraint", "Which characters did Harrison Ford play in films directed by Francis Ford Coppola?",
     ["harrison_ford"], f"{ACTS_IN},{CHARACTER}", (1, f"{PERF_FILM},{DIRECTED_BY}", "francis_ford_coppola"),
     ["char:Martin Stett", "char:Colonel Lucas"]),
    ("constraint", "Which Australian actors appeared in films directed by Christopher Nolan?",
     ["christopher_nolan"], f"{DIRECTOR_OF},{STARRING},{ACTOR}", (3, "people.person.nationality", "australia"),
     ["guy_pearce", "hugh_jackman", "heath_ledger", "elizabeth_debicki"]),
    ("constraint", "Which actors in The Dark Knight were born in London?", ["the_dark_knight"],
     f"{STARRING},{ACTOR}", (2, BORN_IN, "london"), ["gary_oldman", "michael_caine"]),
    ("constraint", "Which actor appeared in both Inception and Interstellar?", ["inception"],
     f"{STARRING},{ACTOR}", (2, f"{ACTS_IN},{PERF_FILM}", "interstellar"), ["michael_caine"]),
    ("constraint", "For which film did Daniel Day-Lewis win the Academy Award in 2013?", ["daniel_day_lewis"],
     f"{WON},{HONOR_FOR}", (1, HONOR_YEAR, year_literal(2013)), ["lincoln"]),
    ("constraint", "Which film directed by Martin Scorsese won the Palme d'Or?", ["martin_scorsese"], DIRECTOR_OF,
     (1, f"{WORK_AWARDS},{HONOR_AWARD}", "palme_d_or"), ["taxi_driver"]),
    ("constraint", "Which film directed by Kate Winslet's former husband starred Kate Winslet?", ["kate_winslet"],
     f"people.person.spouse_s,people.marriage.spouse,{DIRECTOR_OF}", (3, f"{STARRING},{ACTOR}", "kate_winslet"),
     ["revolutionary_road"]),
    ("constraint", "Who composed the music for the Christopher Nolan film released in 2008?", ["christopher_nolan"],
     f"{DIRECTOR_OF},film.film.music", (1, RELEASED, year_literal(2008)), ["hans_zimmer", "james_newton_howard"]),
    ("constraint", "Christopher Nolan or Quentin Tarantino: which films were directed by the one born in London?",
     ["christopher_nolan", "quentin_tarantino"], DIRECTOR_OF, (0, BORN_IN, "london"), NOLAN_FILMS),
]


def resolve(ref: str) -> str:
    if ref.startswith('"'):
        return ref
    if ref.startswith("char:"):
        return char(ref[5:])
    return ent(ref)


# ============================================================================================================
# A plain interpreter for chains and constraints (independent of kgqa), used for the self-check
# ============================================================================================================

_LEX_RE = re.compile(r'^"((?:[^"\\]|\\.)*)"')


def lexical(node: str) -> str | None:
    match = _LEX_RE.match(node)
    return match.group(1) if match else None


class Index:
    def __init__(self, triples: list[tuple[str, str, str]]) -> None:
        self.out: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.inc: dict[tuple[str, str], set[str]] = defaultdict(set)
        for h, r, t in triples:
            self.out[(h, r)].add(t)
            self.inc[(t, r)].add(h)

    def step(self, node: str, hop: str) -> set[str]:
        if hop.startswith("^"):
            return self.inc.get((node, hop[1:]), set())
        return self.out.get((node, hop), set())

    def paths(self, topics: list[str], chain: list[str]) -> list[tuple[str, ...]]:
        paths = [(t,) for t in topics]
        for hop in chain:
            paths = [(*p, n) for p in paths for n in sorted(self.step(p[-1], hop))]
        return paths

    def reaches(self, start: str, chain: list[str], target: str) -> bool:
        ends = {p[-1] for p in self.paths([start], chain)}
        if target.startswith('"'):
            return any(lexical(e) == lexical(target) for e in ends if e.startswith('"'))
        return target in ends

    def answer(self, topics: list[str], chain: list[str], constraint: tuple[int, list[str], str] | None) -> set[str]:
        paths = self.paths(topics, chain)
        if constraint is not None:
            source, c_chain, target = constraint
            paths = [p for p in paths if self.reaches(p[source], c_chain, target)]
        return {p[-1] for p in paths}


def check(b: Builder) -> list[dict]:
    """Execute every question's gold chain on the triples; fail loudly on any disagreement. Returns the records."""
    index = Index(b.triples)
    relations = {r for _, r, _ in b.triples}
    errors: list[str] = []
    records = []
    for number, (qtype, text, topics, chain, constraint, gold) in enumerate(QUESTIONS, start=1):
        qid = f"demo-{number:03d}"
        hops = chain.split(",")
        topic_ids = [resolve(t) for t in topics]
        gold_ids = [resolve(g) for g in gold]
        c = None
        if constraint is not None:
            c = (constraint[0], constraint[1].split(","), resolve(constraint[2]))
        for hop in hops + (c[1] if c else []):
            if hop.lstrip("^") not in relations:
                errors.append(f"{qid}: relation {hop} is not in the KG")
        for entity in topic_ids + gold_ids + ([c[2]] if c else []):
            if not entity.startswith('"') and entity not in b.names:
                errors.append(f"{qid}: {entity} has no name (unknown entity?)")
        if len(set(gold_ids)) != len(gold_ids):
            errors.append(f"{qid}: duplicate gold answers")
        got = index.answer(topic_ids, hops, c)
        if got != set(gold_ids):
            errors.append(f"{qid} {text!r}: gold chain returns {sorted(got)}, hand-written gold is {sorted(gold_ids)}")
        if c is not None and not index.answer(topic_ids, hops, None) > got:
            errors.append(f"{qid} {text!r}: the constraint filters nothing out, so it tests nothing")

        def label(node: str) -> str:
            return (lexical(node) or "") if node.startswith('"') else b.names.get(node, "?")

        records.append({
            "id": qid, "question": text,
            "topic_entities": [{"id": t, "name": label(t)} for t in topic_ids],
            "answers": [{"id": g, "name": label(g)} for g in gold_ids if g in b.names or g.startswith('"')],
            "hops": len(hops), "chain": chain,
            "constraint": None if c is None else {"source": c[0], "chain": constraint[1], "target": c[2]},
            "type": qtype,
        })
    # Structural checks: CVTs nameless, every other node named, no dangling references.
    nodes = {h for h, _, _ in b.triples} | {t for _, _, t in b.triples if not t.startswith('"')}
    for node in sorted(nodes):
        if node in b.cvts and node in b.names:
            errors.append(f"CVT {node} has a name")
        if node not in b.cvts and node not in b.names:
            errors.append(f"entity {node} has no name")
    for node in sorted(b.cvts | set(b.names)):
        if node not in nodes:
            errors.append(f"{node} has no edge (an unused entry in the fact tables?)")
    if errors:
        raise SystemExit("demo KG self-check FAILED:\n  " + "\n  ".join(errors))
    return records


def render(b: Builder, records: list[dict]) -> dict[str, str]:
    """The three output files as text, keyed by file name."""
    triples = "".join(f"{h}\t{r}\t{t}\n" for h, r, t in b.triples)
    names = "".join(f"{entity}\t{name}\n" for entity, name in sorted(b.names.items()))
    questions = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    return {"triples.tsv": triples, "names.tsv": names, "questions.jsonl": questions}


def main(out_dir: Path = HERE) -> None:
    b = build()
    records = check(b)
    for file_name, text in render(b, records).items():
        (out_dir / file_name).write_text(text, encoding="utf-8", newline="\n")
    counts: dict[str, int] = defaultdict(int)
    for record in records:
        counts[record["type"]] += 1
    relations = {r for _, r, _ in b.triples}
    print(f"triples={len(b.triples)} names={len(b.names)} cvts={len(b.cvts)} relations={len(relations)} "
          f"questions={len(records)} {dict(counts)}; self-check passed", file=sys.stderr)


if __name__ == "__main__":
    main()
