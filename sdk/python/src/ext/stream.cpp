// stream.cpp - tenso._tenso.Decoder: libtenso's push decoder (tenso_decoder), the only framing
// code the Python SDK uses. Python's stream readers are byte movers over it: they receive into
// the memory buffer() names (the packet's own buffer once its length is known) and commit();
// file descriptors are read by tenso_decoder_read_fd with the GIL released, and so is every
// feed or commit of a large packet (the one that completes it decodes it: LZ4, checksums).
#include <atomic>

#include "common.hpp"

namespace tpy {

namespace {

struct DecoderFree {
    void operator()(tenso_decoder *d) const noexcept { tenso_decoder_free(d); }
};

class Decoder {
public:
    Decoder(py::handle options, bool read_ahead, bool copy, bool align, bool writeable)
        : mode_{copy, align, writeable} {
        tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
        const bool limited = decode_options_from(options, o);
        tenso_decoder_options dopts = TENSO_DECODER_OPTIONS_INIT;
        dopts.flags = read_ahead ? TENSO_DECODER_READ_AHEAD : 0u;
        dopts.decode = limited ? &o : nullptr;
        tenso_decoder *d = nullptr;
        check(tenso_decoder_new(&d, &dopts));
        d_.reset(d);
    }

    // A writable memoryview of exactly the bytes the decoder needs next (never past the packet).
    // Valid until the next call on this decoder: the readers write into it at once.
    py::object buffer() {
        Use use(*this);
        void *dst = nullptr;
        size_t len = 0;
        check(tenso_decoder_buffer(d_.get(), &dst, &len));
        PyObject *mv = PyMemoryView_FromMemory(static_cast<char *>(dst), Py_ssize_t(len), PyBUF_WRITE);
        if (!mv) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(mv);
    }

    // n bytes were written into buffer(): the decoded object once the packet is complete, else None.
    py::object commit(size_t n) {
        Use use(*this);
        tenso_view *v = nullptr;
        tenso_status st;
        if (large(n)) {
            py::gil_scoped_release nogil;
            st = tenso_decoder_commit(d_.get(), n, &v);
        } else {
            st = tenso_decoder_commit(d_.get(), n, &v);
        }
        taken(st, n, v);
        return v ? view_to_python(v, mode_) : py::none();
    }

    // Bytes from a buffer: (consumed, object or None). consumed < len(data) means the rest
    // belongs to the next packet.
    py::tuple feed(py::handle data) {
        Use use(*this);
        BufferHold b;
        b.acquire(data, PyBUF_SIMPLE);
        size_t consumed = 0;
        tenso_view *v = nullptr;
        tenso_status st;
        if (large(b.size())) {
            py::gil_scoped_release nogil;
            st = tenso_decoder_feed(d_.get(), b.data(), b.size(), &consumed, &v);
        } else {
            st = tenso_decoder_feed(d_.get(), b.data(), b.size(), &consumed, &v);
        }
        taken(st, consumed, v);
        return py::make_tuple(consumed, v ? view_to_python(v, mode_) : py::none());
    }

    // One packet from a file descriptor (GIL released); None at a clean end of stream.
    py::object read_fd(int fd) {
        Use use(*this);
        tenso_view *v = nullptr;
        tenso_status st;
        {
            py::gil_scoped_release nogil;
            st = tenso_decoder_read_fd(&v, d_.get(), fd);
        }
        if (st == TENSO_E_END_OF_STREAM) return py::none();
        check(st);
        return view_to_python(v, mode_);
    }

    void finish() {
        Use use(*this);
        check(tenso_decoder_finish(d_.get()));
    }
    void reset() {
        Use use(*this);
        tenso_decoder_reset(d_.get());
        packet_bytes_ = 0;
    }
    size_t needed() {
        Use use(*this);
        return tenso_decoder_needed(d_.get());
    }
    bool idle() {
        Use use(*this);
        return tenso_decoder_idle(d_.get()) != 0;
    }

private:
    // A decoder is used by one thread at a time; read_fd releases the GIL, so a second thread
    // could otherwise enter it meanwhile. Refuse that instead of corrupting its state.
    class Use {
    public:
        explicit Use(Decoder &d) : d_(d) {
            if (d_.busy_.exchange(true)) raise_value_error("tenso Decoder: in use by another thread");
        }
        ~Use() { d_.busy_.store(false); }
        Use(const Use &) = delete;
        Use &operator=(const Use &) = delete;

    private:
        Decoder &d_;
    };

    // The GIL goes for n new bytes of a packet that is large with them: a bulk copy, or the
    // decode that the packet's last bytes start (sized by the packet, not by those bytes).
    bool large(size_t n) const { return n >= kReleaseGilBytes || packet_bytes_ + n >= kReleaseGilBytes; }
    void taken(tenso_status st, size_t n, const tenso_view *v) {
        packet_bytes_ = st != TENSO_OK || v ? 0 : packet_bytes_ + n;
        check(st);
    }

    std::unique_ptr<tenso_decoder, DecoderFree> d_;
    std::atomic<bool> busy_{false};
    DecodeMode mode_;
    size_t packet_bytes_ = 0;  // of the packet in progress, fed or committed so far
};

// One packet from a file descriptor with the calling thread's decoder for this (copy, align):
// read_stream's decoders, one per thread and mode, made on first use and freed when the thread
// ends (views they handed out stay valid). The next packet reuses the previous one's buffer once
// its arrays are gone, so a stream of large packets does not map and fault in fresh memory for
// each one; and finding the decoder costs no Python lookup per packet. Only this thread uses
// its decoders, and it runs no Python while one reads, so no busy flag is needed.
py::object thread_read_fd(int fd, bool copy, bool align) {
    thread_local std::unique_ptr<tenso_decoder, DecoderFree> decoders[4];
    std::unique_ptr<tenso_decoder, DecoderFree> &d = decoders[(copy ? 2 : 0) | (align ? 1 : 0)];
    if (!d) {
        tenso_decoder *made = nullptr;
        check(tenso_decoder_new(&made, nullptr));  // no read-ahead: nothing past the packet is read
        d.reset(made);
    }
    tenso_view *v = nullptr;
    tenso_status st;
    {
        py::gil_scoped_release nogil;
        st = tenso_decoder_read_fd(&v, d.get(), fd);
    }
    if (st == TENSO_E_END_OF_STREAM) return py::none();
    if (st != TENSO_OK) {
        tenso_decoder_reset(d.get());  // a partial packet belongs to that stream, not to the next call's
        raise_status(st);
    }
    return view_to_python(v, DecodeMode{copy, align});
}

}  // namespace

void init_stream(py::module_ &m) {
    m.def("thread_read_fd", &thread_read_fd, py::arg("fd"), py::arg("copy") = false, py::arg("align") = true,
          "One packet from a file descriptor (GIL released) with this thread's decoder for (copy, align), "
          "never reading past it; None at a clean end. A failed packet resets that decoder.");
    py::class_<Decoder>(m, "Decoder",
                        "libtenso's stream decoder (tenso_decoder): framing, limits and decoding of a "
                        "byte stream, one packet at a time.")
        .def(py::init<py::handle, bool, bool, bool, bool>(), py::arg("options") = py::none(),
             py::arg("read_ahead") = false, py::arg("copy") = false, py::arg("align") = false,
             py::arg("writeable") = false,
             "options: DecodeOptions._fields() or None; read_ahead: read_fd may read past a packet "
             "(only for a stream this decoder alone reads); copy: writeable copies; align: copy "
             "arrays that miss their declared alignment (as loads); writeable: writeable views of "
             "the decoder's own memory, which nothing else sees (no copy).")
        .def("buffer", &Decoder::buffer, "Writable memoryview of exactly the bytes needed next.")
        .def("commit", &Decoder::commit, py::arg("n"), "n bytes were written into buffer(); the object or None.")
        .def("feed", &Decoder::feed, py::arg("data"), "(consumed, object or None).")
        .def("read_fd", &Decoder::read_fd, py::arg("fd"), "One packet from a file descriptor; None at a clean end.")
        .def("finish", &Decoder::finish, "End of input: TensoTruncatedError inside a packet.")
        .def("reset", &Decoder::reset, "Drops a partial packet (needed after an error).")
        .def_property_readonly("needed", &Decoder::needed, "Bytes still needed before progress.")
        .def_property_readonly("idle", &Decoder::idle, "True between packets.");
}

}  // namespace tpy
