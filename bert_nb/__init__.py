"""bert-nb: BERT, taught and shipped. The main names are here; each loads its module (and torch) on first use,
so `import bert_nb.rng` stays light."""
__version__ = "0.1.0"
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

KJV = Path(__file__).parent / 'models' / 'kjv'  # the small BERT the package ships; its card is KJV / 'README.md'

_EXPORTS = {
    'bert_nb.rng': ['PCG32'],
    'bert_nb.wordpiece': ['SPECIALS', 'WordPieceTokenizer', 'train_vocab', 'word_counts'],
    'bert_nb.bert': ['BertConfig', 'BertAttention', 'BertLayer', 'BertEncoder', 'BertPooler', 'BertForMLM',
                     'EncoderOutput', 'MLMOutput', 'MLMHead', 'LoadReport', 'mlm_mask', 'mlm_batch', 'special_ids',
                     'init_weights', 'load_bert', 'save_bert', 'load_parts', 'save_parts', 'load_hf_bert',
                     'hf_bert_encoder_sd'],
    'bert_nb.data': ['MLMCollator', 'ForTrainer', 'mlm_loader', 'Verse', 'kjv_verses'],
    'bert_nb.pretrain': ['RunArgs', 'fill', 'load_model', 'make_optimizer', 'DEFAULT_CORPUS'],
    'bert_nb.run': ['train'],
}
_WHERE = {name: mod for mod, names in _EXPORTS.items() for name in names}
__all__ = ['KJV', *_WHERE]

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ imports on first use
    from bert_nb.rng import PCG32
    from bert_nb.wordpiece import SPECIALS, WordPieceTokenizer, train_vocab, word_counts
    from bert_nb.bert import (BertConfig, BertAttention, BertLayer, BertEncoder, BertPooler, BertForMLM,
                              EncoderOutput, MLMOutput, MLMHead, LoadReport, mlm_mask, mlm_batch, special_ids,
                              init_weights, load_bert, save_bert, load_parts, save_parts, load_hf_bert,
                              hf_bert_encoder_sd)
    from bert_nb.data import MLMCollator, ForTrainer, mlm_loader, Verse, kjv_verses
    from bert_nb.pretrain import RunArgs, fill, load_model, make_optimizer, DEFAULT_CORPUS
    from bert_nb.run import train

def __getattr__(name: str):
    if name not in _WHERE: raise AttributeError(f"module 'bert_nb' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value

def __dir__() -> list[str]: return sorted(set(globals()) | set(__all__))
