"""Detectors: what finds the spans worth protecting in a text (names, places, dates...), apart from
what is done with them, as Presidio keeps its recognisers apart from its anonymizer.

A detector is a :class:`~audit.core.interfaces.Detector`: ``detect(texts)`` returns one list of
labelled spans per text. The built-in ones are ``spacy_ner`` (:mod:`.spacy_ner`) and ``presidio``
(:mod:`.presidio`), declared as entry points of ``anonaudit.detectors`` exactly as a third-party
one would be; INTACT, the delinker and ``anonaudit harden`` take any of them by name, and the
``spacy_ner`` and ``presidio`` sanitizers mask what their detector finds.
"""
