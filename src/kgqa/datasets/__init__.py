"""Benchmark question sets, read in their public formats from a data directory, and the gold relation chains some of
them carry.

``load_dataset("metaqa-2hop", split="dev")`` returns a list of :class:`~kgqa.core.Question`. The registry and loading
live in :mod:`~kgqa.datasets.registry`, what the loaders share in :mod:`~kgqa.datasets.records`, one module per family
of public files registers its datasets (:mod:`~kgqa.datasets.metaqa`, :mod:`~kgqa.datasets.freebase`,
:mod:`~kgqa.datasets.tog_files`, :mod:`~kgqa.datasets.demo`). Gold relation chains (MetaQA's question types, WebQSP's
inferential chains, the demo's written chains, CWQ's SPARQL read by :mod:`~kgqa.datasets.sparql_chains`) and the gold
constraints on them are read by :mod:`~kgqa.datasets.gold_chains`: the supervision methods that train use
(``kgqa train``).

==================  ======================================================  ==========================================
name                files (relative to the data directory)                  public source
==================  ======================================================  ==========================================
metaqa-{1,2,3}hop   metaqa/{k}-hop/qa_{dev,test}.txt (+ qa_*_qtype.txt)     github.com/yuyuz/MetaQA (vanilla QA files)
webqsp              questions/aog/WebQSP.json (1,639, names only)           github.com/xuduyinuo/AoG data/WebQSP.json
webqsp-gog          questions/gog/webqsp/data_with_ct_0.json (1,000)        github.com/YaooXu/GoG data/webqsp
cwq                 questions/tog/cwq.json + chatkbqa/CWQ/                  ToG data/cwq.json; ChatKBQA data/CWQ/origin;
                    ComplexWebQuestions_test.json + pog/cope_alias/         PoG cope_alias/cwq_aname_dict.json
                    cwq_aname_dict.json
cwq-gog             questions/gog/cwq/cwq_1000.json (1,000: the first       github.com/YaooXu/GoG data/cwq; answers as
                    1,000 of cwq) + the two answer files of cwq             cwq
grailqa             questions/tog/grailqa.json (1,000 sampled)              github.com/IDEA-FinAI/ToG data/
qald10-en           questions/tog/qald_10-en.json (333, Wikidata)           github.com/IDEA-FinAI/ToG data/
webquestions        questions/tog/WebQuestions.json (2,032)                 github.com/IDEA-FinAI/ToG data/
simplequestions     questions/tog/SimpleQA.json (1,000 sampled)             github.com/IDEA-FinAI/ToG data/
demo                (packaged) src/kgqa/data/demo/questions.jsonl           written for kgqa
metaqa-reworded-*   (packaged) src/kgqa/data/metaqa_reworded/               written for kgqa
==================  ======================================================  ==========================================

Questions without an id in the file get ``<dataset>-<record index>`` (MetaQA: ``<dataset>-<split>-<line number>``).
"""

from kgqa.datasets import demo, freebase, metaqa, tog_files  # noqa: F401  (each registers its datasets)
from kgqa.datasets.registry import (
    DATA_DIR_ENV,
    DATASETS,
    DatasetInfo,
    dataset_info,
    dataset_names,
    dataset_root,
    load_dataset,
    register_dataset,
    resolve_data_dir,
)

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DatasetInfo",
    "dataset_info",
    "dataset_names",
    "dataset_root",
    "load_dataset",
    "register_dataset",
    "resolve_data_dir",
]
