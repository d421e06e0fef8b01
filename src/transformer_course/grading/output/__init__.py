"""What is written for people, used by every stage (and the instructors' and LMS tools).

- :mod:`.atomic`: writes that a reader, or a crash, never sees half done;
- :mod:`.memo`: what every feedback page of a class renders alike, rendered once a process;
- :mod:`.sanitise`: what a student wrote reaches a browser as text or sanitised HTML, never live;
- :mod:`.spreadsheet`: CSV files that open in a spreadsheet without running what a student wrote.
"""
