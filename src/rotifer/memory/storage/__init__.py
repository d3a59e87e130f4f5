"""Storage: the interface every backend implements (:mod:`.backend`), the row
decoding and SQL both SQL backends share (:mod:`.rows`, :mod:`.sql_text`,
:mod:`.sql_transaction`), and the backends themselves (:mod:`.sqlite`,
:mod:`.postgres`).  Nothing here knows a policy rule; the rooms above decide.
"""
